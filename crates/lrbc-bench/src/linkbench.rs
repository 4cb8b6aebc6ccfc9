//! `lrbc-bench serve --link RATES`: `serve` and a viewer behind a rate-limited link (a
//! network namespace whose loopback is shaped by `tc`'s token bucket), for users who
//! view a run over 2–100 Mbit/s. The engine and client run outside the namespace; `serve`
//! and the viewer (`lrbc-bench link-viewer`) inside it, talking over its loopback only.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, sync_channel};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::fixtures::start;
use crate::shared::BenchError;
use lrbc_sim::children::ChildProcess;
use lrbc_sim::engine::Preset;
use lrbc_testkit::netns::Netns;

/// Parses a link rate into kbit/s: `5mbit`, `500kbit`, `1gbit`, or a plain number of
/// Mbit/s (`5`, `0.5`).
pub fn parse_rate(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_lowercase();
    let (number, kbit_per_unit) = [("kbit", 1.0), ("mbit", 1e3), ("gbit", 1e6)]
        .iter()
        .find_map(|&(unit, scale)| t.strip_suffix(unit).map(|n| (n.trim_end(), scale)))
        .unwrap_or((t.as_str(), 1e3));
    let kbit = number
        .parse::<f64>()
        .map(|v| v * kbit_per_unit)
        .map_err(|_| {
            format!("{text:?} is not a link rate (e.g. 5mbit, 500kbit, or 5 for Mbit/s)")
        })?;
    if !kbit.is_finite() || !(100.0..=10e6).contains(&kbit) {
        return Err(format!("a link rate from 100kbit to 10gbit, not {text}"));
    }
    Ok(kbit.round() as u64)
}

/// A rate as people write it: `5 Mbit/s`, `500 kbit/s`.
fn rate_label(kbit: u64) -> String {
    if kbit >= 1000 {
        format!("{} Mbit/s", kbit as f64 / 1e3)
    } else {
        format!("{kbit} kbit/s")
    }
}

/// The namespace of a link of `kbit` kbit/s (`lrbc_testkit::netns`).
fn link(kbit: u64) -> Result<Netns, BenchError> {
    Ok(Netns::create(kbit)?)
}

/// Whether links can be made here, as one line saying why not (not Linux, not root, no
/// `ip` or `tc`).
fn check_links() -> Result<(), BenchError> {
    match lrbc_testkit::netns::unavailable() {
        None => Ok(()),
        Some(why) => Err(BenchError::Other(format!(
            "lrbc-bench serve --link cannot make a link here: {why}"
        ))),
    }
}

/// A child of `command` (in the namespace) with its stdout piped, interrupted and reaped
/// when dropped, and its stdout as lines on a named thread.
fn spawn(
    what: &'static str,
    mut command: Command,
    stderr: Stdio,
) -> Result<(ChildProcess, Receiver<String>), BenchError> {
    lrbc_platform::terminate_with_parent(&mut command);
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|e| BenchError::Other(format!("cannot start the {what}: {e}")))?;
    let stdout = child.stdout.take();
    let child = ChildProcess { what, child };
    let (tx, rx) = sync_channel(64);
    if let Some(mut out) = stdout {
        std::thread::Builder::new()
            .name(format!("link-{what}-out"))
            .spawn(move || {
                // Read to the end, so that the child never waits on a full pipe; lines
                // nobody takes are dropped.
                for line in BufReader::new(&mut out).lines() {
                    let Ok(line) = line else { break };
                    // A full queue drops the line: nobody reads that many.
                    let _ = tx.try_send(line);
                }
            })
            .map_err(|e| BenchError::Other(format!("cannot read the {what}'s output: {e}")))?;
    }
    Ok((child, rx))
}

/// The next line of a child within `timeout`, giving up early when stopped.
fn line_within(
    rx: &Receiver<String>,
    timeout: Duration,
    stop: &AtomicBool,
    what: &str,
) -> Result<String, BenchError> {
    let deadline = Instant::now() + timeout;
    loop {
        // Relaxed: a flag with no data behind it.
        if stop.load(Ordering::Relaxed) {
            return Err(BenchError::Other("interrupted".into()));
        }
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => return Ok(line),
            Err(RecvTimeoutError::Timeout) if Instant::now() < deadline => {}
            Err(RecvTimeoutError::Timeout) => {
                return Err(BenchError::Other(format!(
                    "the {what} said nothing within {:.0} s",
                    timeout.as_secs_f64()
                )));
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(BenchError::Other(format!(
                    "the {what} ended without a word"
                )));
            }
        }
    }
}

/// One row: `serve` of `binary` on the run's segment in the namespace, a viewer for
/// `secs` after `skip`; the viewer's report and how long serve took to stop.
fn measure(
    ns: &Netns,
    binary: &Path,
    segment: &str,
    serve_args: &[&str],
    (secs, skip): (f64, f64),
    stop: &AtomicBool,
) -> Result<(Value, Option<f64>), BenchError> {
    let mut command = ns.command(binary);
    command
        .args(["serve", "--shm", segment, "--listen", "127.0.0.1:0"])
        .args(serve_args);
    // Its progress lines (one a second) would cut into the table.
    let (mut server, out) = spawn("server", command, Stdio::null())?;
    let first = line_within(&out, Duration::from_secs(20), stop, "server")?;
    let url = first
        .strip_prefix("listening on ")
        .filter(|u| u.starts_with("ws://127.0.0.1:"))
        .ok_or_else(|| BenchError::Other(format!("serve's first line: {first}")))?
        .to_string();
    let mut command = ns.command(crate::fixtures::this_program()?);
    command.args(["link-viewer", "--url", &url]).args([
        "--secs".to_string(),
        secs.to_string(),
        "--skip-secs".into(),
        skip.to_string(),
    ]);
    let (mut viewer, report) = spawn("viewer", command, Stdio::inherit())?;
    let line = line_within(
        &report,
        Duration::from_secs_f64(secs + skip + 30.0),
        stop,
        "viewer",
    )?;
    let v: Value = serde_json::from_str(&line)
        .map_err(|e| BenchError::Other(format!("the viewer's report: {e}: {line}")))?;
    viewer.stop(Duration::from_secs(5));
    // How long serve takes to stop on Ctrl-C, the viewer gone.
    let asked = Instant::now();
    let code = server.stop(Duration::from_secs(5));
    let stopped = (code == Some(0)).then(|| asked.elapsed().as_secs_f64());
    Ok((v, stopped))
}

/// The figures of a row, in the table's order.
fn figures(v: &Value) -> [f64; 9] {
    let f = |a: &str, b: &str| v[a][b].as_f64().unwrap_or(f64::NAN);
    [
        f("captured_per_sec", "frames"),
        f("frame", "per_sec"),
        f("image", "per_sec"),
        f("ring", "per_sec"),
        100.0 * v["ring_share"]["share"].as_f64().unwrap_or(f64::NAN),
        f("all", "age_p50_ms"),
        f("all", "age_p99_ms"),
        f("frame", "age_p99_ms"),
        v["bytes_per_sec"].as_f64().unwrap_or(f64::NAN) / 1e6,
    ]
}

/// The widths of the figures' columns.
const WIDTHS: [usize; 9] = [9, 9, 9, 9, 8, 9, 9, 9, 7];

fn print_row(link: &str, workload: &str, binary: &str, cells: &[String], last: &str) {
    let cells: Vec<String> = (cells.iter().zip(WIDTHS))
        .map(|(c, w)| format!("{c:>w$}"))
        .collect();
    println!(
        "  {link:<12} {workload:<36} {binary:<8} {} {last:>8}",
        cells.join(" ")
    );
}

/// The workloads: a preset at 1 kHz, the label, and serve's options (those after the
/// first two only of this binary: older builds have no `--image-format`).
const WORKLOADS: [(Preset, &str, &[&str]); 3] = [
    (Preset::Train4096, "train4096 at 1 kHz", &[]),
    (
        Preset::Cams64,
        "cams64 at 1 kHz, --images --all-envs",
        &["--images", "--all-envs"],
    ),
    (
        Preset::Cams64,
        "cams64 at 1 kHz, … --image-format jpeg",
        &["--images", "--all-envs", "--image-format", "jpeg"],
    ),
];

/// What `lrbc-bench serve --link` measures: the rates, the seconds of each row, and another
/// binary's `serve` to measure next to this one's.
#[derive(Clone, Copy, Debug)]
pub struct Links<'a> {
    pub rates_kbit: &'a [u64],
    pub secs: f64,
    pub against: Option<&'a Path>,
}

pub fn run(links: &Links<'_>) -> Result<(), BenchError> {
    let &Links {
        rates_kbit,
        secs: link_secs,
        against,
    } = links;
    // Before anything starts: a machine that cannot make a link is one line.
    check_links()?;
    if let Some(other) = against
        && !other.is_file()
    {
        return Err(BenchError::Usage(format!(
            "--against {}: no such program",
            other.display()
        )));
    }
    // This build's lrbc-inspector, whose `serve` is measured.
    let this = lrbc_sim::children::inspector_exe()?;
    let stop = Arc::new(AtomicBool::new(false));
    lrbc_platform::stop_on_interrupt(&stop);
    let skip = link_secs / 2.0;
    let secs = link_secs - skip;
    println!(
        "lrbc-bench serve --link: engine and client outside a network namespace; `serve` and a viewer (lrbc-bench link-viewer) inside it, over its loopback limited by tc's token bucket (burst 64 KiB, MTU 1500); each row {link_secs:.0} s, the last {secs:.0} s measured"
    );
    println!(
        "  (age = arrival at the viewer minus the message's log time on the wire, both Unix time on this machine; ring share = ring entries received of those serve captured, by log time between two status messages; stop = seconds serve took to exit on SIGINT with the viewer gone, – if it had to be killed)"
    );
    println!(
        "  {:<12} {:<36} {:<8} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>7} {:>8}",
        "link",
        "workload",
        "binary",
        "served",
        "frames/s",
        "images/s",
        "ring/s",
        "ring %",
        "age p50",
        "age p99",
        "frame p99",
        "MB/s",
        "stop s"
    );
    println!(
        "  (served = frames/s serve's capture took, which its frame follower thins on a busy machine; ages in ms; ratio = this ÷ against)"
    );
    let binaries: Vec<(&str, &Path)> = std::iter::once(("this", this.as_path()))
        .chain(against.map(|a| ("against", a)))
        .collect();
    for (w, (preset, label, serve_args)) in WORKLOADS.into_iter().enumerate() {
        let run = start(preset, (Some(1000.0), "random"), None, "link")?;
        // The run settles before the first row.
        std::thread::sleep(Duration::from_secs(2));
        for &kbit in rates_kbit {
            let ns = link(kbit)?;
            let link = rate_label(kbit);
            let mut rows = Vec::new();
            for &(which, binary) in binaries.iter().take(if w < 2 { 2 } else { 1 }) {
                let (v, stopped) =
                    measure(&ns, binary, &run.name, serve_args, (secs, skip), &stop)?;
                if let Some(e) = v["error"].as_str() {
                    eprintln!("  ({which}, {link}, {label}: the viewer's connection ended: {e})");
                }
                let x = figures(&v);
                let cells: Vec<String> = (x.iter().zip([1, 1, 1, 1, 2, 1, 1, 1, 3]))
                    .map(|(v, p)| format!("{v:.p$}"))
                    .collect();
                let last = stopped.map_or_else(|| "–".to_string(), |s| format!("{s:.2}"));
                print_row(&link, label, which, &cells, &last);
                rows.push(x);
            }
            if let [this, other] = rows.as_slice() {
                let ratios: Vec<String> = (this.iter().zip(other))
                    .map(|(a, b)| format!("{:.3}", a / b))
                    .collect();
                print_row("", "", "ratio", &ratios, "");
            }
        }
        drop(run);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_rates_parse_with_units_or_as_mbit() {
        assert_eq!(parse_rate("5mbit"), Ok(5000));
        assert_eq!(parse_rate("2"), Ok(2000));
        assert_eq!(parse_rate("0.5"), Ok(500));
        assert_eq!(parse_rate("500kbit"), Ok(500));
        assert_eq!(parse_rate("1Gbit"), Ok(1_000_000));
        for bad in ["0", "-5", "fast", "inf", "50kbit", "20gbit", ""] {
            assert!(parse_rate(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(rate_label(5000), "5 Mbit/s");
        assert_eq!(rate_label(500), "500 kbit/s");
    }
}
