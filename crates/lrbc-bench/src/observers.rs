//! Observers of a run switched off (SIGSTOP) and on while it goes, and what they cost
//! the engine's unpaced rate: `lrbc-bench sampler --only rate`, `lrbc-bench record`,
//! `lrbc-bench serve` and `lrbc-bench detect` measure with this.

use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::fixtures::start;
use crate::roundtrip::median;
use crate::shared::BenchError;
use lrbc::attach::{Target, attach};
use lrbc::layout::LayoutChoice;
use lrbc_sim::children::ChildProcess;
use lrbc_sim::engine::Preset;

/// Adds `secs` to the entry named `name`, or appends one.
fn add_by_name(list: &mut Vec<(String, f64)>, name: &str, secs: f64) {
    match list.iter_mut().find(|(n, _)| n == name) {
        Some((_, s)) => *s += secs,
        None => list.push((name.to_string(), secs)),
    }
}

/// CPU seconds used so far by the live threads of a process.
fn cpu_secs(pid: u32) -> f64 {
    lrbc_platform::threads_cpu_secs(pid)
        .iter()
        .map(|(_, s)| s)
        .sum()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Observer {
    /// `watch` with its defaults (the sampler yields to a busy machine).
    Watch,
    /// `watch --busy-budget 0`: the sampler follows every frame, busy machine or not.
    WatchEveryFrame,
    /// The app driven without a window (`lrbc-bench headless-app`: layout and tessellation,
    /// no raster).
    HeadlessApp,
    /// The real window on $DISPLAY (rasterised by the GL driver).
    Window,
    /// `record` of every env's rewards and dones and 8 envs' observations, to a file in
    /// the temporary folder named after the segment.
    Record,
    /// `serve` on a loopback port, with a viewer in this process subscribed to every
    /// channel.
    Serve,
    /// `events`: the detector, every frame's values checked as it comes.
    Events,
    /// `episodes`: every env's episodes from every frame's rewards and flags.
    Episodes,
    /// `compare BASELINE --shm`: every env's values copied with each frame taken and
    /// compared with the baseline's ([`compare_baseline`]).
    Compare,
}

impl Observer {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Observer::Watch => "`watch` (sampler running)",
            Observer::WatchEveryFrame => "`watch --busy-budget 0` (every frame)",
            Observer::HeadlessApp => "the app, every panel, no window (no raster)",
            Observer::Window => "the window (every panel)",
            Observer::Record => "`record --envs 0-7` (to a file)",
            Observer::Serve => "`serve` and a loopback viewer of everything",
            Observer::Events => "`events` (the detector)",
            Observer::Episodes => "`episodes` (every env's episodes)",
            Observer::Compare => "`compare BASELINE --shm` (every env's values)",
        }
    }

    fn args(self, name: &str) -> Vec<String> {
        let shm = ["--shm".to_string(), name.to_string()];
        let mut args: Vec<String> = match self {
            Observer::Watch => vec!["watch".into()],
            Observer::WatchEveryFrame => vec!["watch".into(), "--busy-budget".into(), "0".into()],
            Observer::HeadlessApp => vec!["headless-app".into()],
            // The binary with no subcommand opens the window on $DISPLAY, with its
            // default settings and without touching the user's.
            Observer::Window => vec![
                "--settings".into(),
                settings_file(name).display().to_string(),
            ],
            Observer::Serve => vec!["serve".into()],
            Observer::Events => vec!["events".into()],
            Observer::Episodes => vec!["episodes".into()],
            Observer::Compare => vec![
                "compare".into(),
                compare_baseline(name).display().to_string(),
            ],
            Observer::Record => vec![
                "record".into(),
                "--envs".into(),
                "0-7".into(),
                "-o".into(),
                record_file(name).display().to_string(),
            ],
        };
        args.extend(shm);
        args
    }
}

/// How long an observer is switched on or off at a time, unless told.
pub(crate) const WINDOW: Duration = Duration::from_millis(100);

/// The baseline [`Observer::Compare`] compares the run of the segment `name` with (the
/// caller writes it).
pub(crate) fn compare_baseline(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{name}-baseline.mcap"))
}

/// Writes the baseline of [`Observer::Compare`]: a synthetic recording of train4096's
/// row (obs 100, act 12) for one env, every value recorded, with frames enough for
/// `secs` (and a minute more) at 5,000 steps a second, so that `compare` does not reach
/// its end first. Its values are not the run's: every env compared diverges at its
/// first frame.
fn write_compare_baseline(name: &str, secs: f64) -> Result<(), BenchError> {
    use lrbc_recording::export::synthetic::{self, Spec};
    let path = compare_baseline(name);
    let spec = Spec::of(1, 100, 12, ((secs + 60.0) * 5000.0) as u64);
    let file = std::fs::File::create(&path)
        .map_err(|e| BenchError::Other(format!("{}: {e}", path.display())))?;
    synthetic::write(&spec, std::io::BufWriter::with_capacity(1 << 20, file))
        .map_err(|e| BenchError::Other(format!("{}: {e}", path.display())))?;
    Ok(())
}

/// Where [`Observer::Record`] writes for the segment `name`.
pub(crate) fn record_file(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{name}.mcap"))
}

/// An observer process that is switched off (SIGSTOP: it takes no CPU and has no
/// wakeups, as if it were not there) and on (SIGCONT) while the run goes on.
struct Switched {
    process: ChildProcess,
    on: bool,
    /// The viewer of [`Observer::Serve`].
    _viewer: Option<crate::fixtures::CountingViewer>,
}

impl Switched {
    fn start(observer: Observer, name: &str) -> Result<Self, BenchError> {
        let mut args = observer.args(name);
        let port = crate::fixtures::free_port()?;
        if observer == Observer::Serve {
            args.extend(["--listen".into(), format!("127.0.0.1:{port}")]);
        }
        let process = if observer == Observer::HeadlessApp {
            ChildProcess::spawn_program(
                &crate::fixtures::this_program()?,
                "observer",
                &args,
                Stdio::null(),
            )?
        } else {
            ChildProcess::spawn("observer", &args, Stdio::null())?
        };
        // Let it attach (a window: open and draw its first frames).
        std::thread::sleep(if observer == Observer::Window {
            Duration::from_secs(3)
        } else {
            Duration::from_millis(500)
        });
        let viewer = if observer == Observer::Serve {
            Some(crate::fixtures::CountingViewer::start(&format!(
                "ws://127.0.0.1:{port}"
            ))?)
        } else {
            None
        };
        Ok(Self {
            process,
            on: true,
            _viewer: viewer,
        })
    }

    fn set(&mut self, on: bool) {
        if on != self.on {
            self.on = on;
            let signal = if on {
                lrbc_platform::Signal::Resume
            } else {
                lrbc_platform::Signal::Pause
            };
            lrbc_platform::send_signal(self.process.pid(), signal);
        }
    }

    /// CPU seconds so far, by thread.
    fn cpu(&self) -> Vec<(String, f64)> {
        lrbc_platform::threads_cpu_secs(self.process.pid())
    }
}

impl Drop for Switched {
    fn drop(&mut self) {
        // A stopped process would not act on the interrupt that ends it.
        self.set(true);
    }
}

/// Where a window opened by a benchmark for the segment `name` keeps its settings: a
/// file of its own, so that it runs with the defaults whatever the user last set, and
/// leaves the user's settings as they were.
pub(crate) fn settings_file(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{name}-settings.ron"))
}

/// What switching one observer on and off gave.
pub(crate) struct Cost {
    /// Rate with ÷ without, per ABBA block.
    pub(crate) blocks: Vec<f64>,
    /// Median steps/s with and without.
    pub(crate) rate_on: f64,
    pub(crate) rate_off: f64,
    /// Share of a core while on, by process and thread.
    pub(crate) cpu_on: Vec<(String, f64)>,
    /// The engine's and the client's share of a core, with and without.
    pub(crate) pair_on: (f64, f64),
    pub(crate) pair_off: (f64, f64),
}

/// The engine's lock-step rate (unpaced, or at `hz`) with `observer` switched on and off
/// in short windows, in blocks of off-on-on-off (the drift of a shared machine cancels
/// within a block), for about `secs` seconds of one run.
pub(crate) fn observer_cost(
    observer: Observer,
    hz: Option<f64>,
    secs: f64,
    window: Duration,
    tag: &str,
) -> Result<Cost, BenchError> {
    // Short windows (as [`WINDOW`]): more blocks in the same time, and the machine's drift
    // cancels better within each. A process stops or goes on at once.
    let settle = Duration::from_millis(20);
    // Until the run is dropped.
    let mut run = start(Preset::Train4096, (hz, "random"), Some(1_000_000_000), tag)?;
    let a = attach(&Target::Shm(run.name.clone()), LayoutChoice::Auto)?;
    let frame_seq = || {
        a.segment
            .load_u64(a.geometry.counters.frame_seq)
            .unwrap_or(0)
    };
    let (engine_pid, client_pid) = (
        run.engine.pid(),
        run.client.as_ref().map_or(0, ChildProcess::pid),
    );
    if observer == Observer::Compare {
        write_compare_baseline(&run.name, secs)?;
    }
    let mut sw = Switched::start(observer, &run.name)?;
    let (mut on_rates, mut off_rates, mut blocks) = (Vec::new(), Vec::new(), Vec::new());
    let mut cpu_on: Vec<(String, f64)> = Vec::new();
    let (mut on_secs, mut off_secs) = (0.0, 0.0);
    let (mut pair_on, mut pair_off) = ((0.0, 0.0), (0.0, 0.0));
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < secs || blocks.is_empty() {
        let mut sums = [0.0; 2];
        for on in [false, true, true, false] {
            sw.set(on);
            std::thread::sleep(settle);
            let before = (sw.cpu(), cpu_secs(engine_pid), cpu_secs(client_pid));
            let (f0, t) = (frame_seq(), Instant::now());
            std::thread::sleep(window);
            let (f1, secs_taken) = (frame_seq(), t.elapsed().as_secs_f64());
            let after = (sw.cpu(), cpu_secs(engine_pid), cpu_secs(client_pid));
            let rate = f1.wrapping_sub(f0) as f64 / secs_taken;
            sums[usize::from(on)] += rate;
            let pair = (after.1 - before.1, after.2 - before.2);
            if on {
                on_rates.push(rate);
                on_secs += secs_taken;
                pair_on = (pair_on.0 + pair.0, pair_on.1 + pair.1);
                for (name, s) in &after.0 {
                    let was = before
                        .0
                        .iter()
                        .find(|(n, _)| n == name)
                        .map_or(0.0, |(_, s)| *s);
                    add_by_name(&mut cpu_on, name, s - was);
                }
            } else {
                off_rates.push(rate);
                off_secs += secs_taken;
                pair_off = (pair_off.0 + pair.0, pair_off.1 + pair.1);
            }
        }
        if let Some(code) = run.client.as_mut().and_then(ChildProcess::exited) {
            return Err(BenchError::Other(format!(
                "the client exited ({code}) during the measurement"
            )));
        }
        if sums[0] > 0.0 {
            blocks.push(sums[1] / sums[0]);
        }
    }
    drop(sw);
    match observer {
        Observer::Record => {
            // Cleanup: there may be nothing to remove.
            let _ = std::fs::remove_file(record_file(&run.name));
        }
        Observer::Window => {
            // Cleanup: there may be nothing to remove.
            let _ = std::fs::remove_file(settings_file(&run.name));
        }
        Observer::Compare => {
            // Cleanup: there may be nothing to remove.
            let _ = std::fs::remove_file(compare_baseline(&run.name));
        }
        _ => {}
    }
    drop(run);
    let whose = match observer {
        Observer::Watch | Observer::WatchEveryFrame => "watch",
        Observer::HeadlessApp => "app",
        Observer::Window => "window",
        Observer::Record => "record",
        Observer::Serve => "serve",
        Observer::Events => "events",
        Observer::Episodes => "episodes",
        Observer::Compare => "compare",
    };
    let mut cpu_on: Vec<(String, f64)> = cpu_on
        .into_iter()
        .filter(|(_, s)| *s > 0.0)
        .map(|(n, s)| (format!("{whose} {n}"), s / on_secs.max(1e-9)))
        .collect();
    cpu_on.sort_by(|a, b| b.1.total_cmp(&a.1));
    Ok(Cost {
        blocks,
        rate_on: median(on_rates),
        rate_off: median(off_rates),
        cpu_on,
        pair_on: (pair_on.0 / on_secs.max(1e-9), pair_on.1 / on_secs.max(1e-9)),
        pair_off: (
            pair_off.0 / off_secs.max(1e-9),
            pair_off.1 / off_secs.max(1e-9),
        ),
    })
}

pub(crate) fn fmt_cpu(cpu: &[(String, f64)]) -> String {
    cpu.iter()
        .map(|(n, s)| format!("{n} {:.2} %", 100.0 * s))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Cost {
    /// The geometric mean over blocks of the rate on ÷ off, with its 95 % interval
    /// (zeros when no block was measured).
    pub(crate) fn ratio(&self) -> lrbc_live::stats::Interval {
        lrbc_live::stats::geometric_mean(&self.blocks).unwrap_or(lrbc_live::stats::Interval {
            estimate: 0.0,
            low: 0.0,
            high: 0.0,
        })
    }
}

/// One line: the engine's rate with `observer` on ÷ off, and where the observer's CPU went.
pub(crate) fn print_cost(observer: Observer, c: &Cost) {
    let lrbc_live::stats::Interval {
        estimate,
        low,
        high,
    } = c.ratio();
    println!(
        "  with {:<40} ratio {estimate:.3} (95 % CI {low:.3}–{high:.3}, {} blocks; {:.0} vs {:.0} steps/s); {}",
        observer.label(),
        c.blocks.len(),
        c.rate_on,
        c.rate_off,
        fmt_cpu(&c.cpu_on)
    );
}
