//! The command line: arguments, the error printed once, and the subcommands.

pub mod args;
pub mod compare;
mod control;
mod demo;
pub mod detection;
mod dump;
pub mod episodes;
pub mod events;
pub mod export;
mod list;
mod looking;
mod open;
pub mod record;
pub mod serve;
mod sim;
mod traffic;
pub mod values;
pub mod watch;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{Args, Parser, Subcommand};

use lrbc::attach::{AttachError, Target};
use lrbc::layout::LayoutChoice;

/// Inspect LRBC shared-memory segments between LuckyEngine and its trainer, read-only.
#[derive(Debug, Parser)]
#[command(name = "lrbc-inspector", version, about, long_about = None)]
pub struct Cli {
    #[command(flatten)]
    pub target: TargetArgs,
    /// Print the details behind an error.
    #[arg(long, short, global = true)]
    pub verbose: bool,
    #[command(flatten)]
    pub window: WindowArgs,
    /// Open the window on a run served by `lrbc-inspector serve` (ws://HOST:PORT); given
    /// several times, the window connects to each server and shows the first (the
    /// Attach view has a row for each).
    #[arg(long, value_name = "URL", value_parser = args::parse_server, conflicts_with_all = ["shm", "pid", "path"])]
    pub connect: Vec<String>,
    /// Trust the certificates of this PEM file for wss:// servers (a server's
    /// self-signed certificate), besides the system's.
    #[arg(long, value_name = "FILE", requires = "connect")]
    pub tls_ca: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Settings of the window for this run (kept, as changes made in the window are).
#[derive(Debug, Clone, Args)]
pub struct WindowArgs {
    /// The window's memory budget in MiB (16 to 65536; default: as last set, 128).
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u32).range(16..=65536))]
    pub memory_budget: Option<u32>,
    /// The window's sampler on a busy machine, percent of one core (0 follows every
    /// frame; default: as last set, 0.5).
    #[arg(long, value_name = "PCT", value_parser = args::parse_percent)]
    pub busy_budget: Option<f32>,
    /// Start recording (as Record in the status bar) once attached to a live segment;
    /// the file goes to the recordings folder (Settings).
    #[arg(long)]
    pub record: bool,
    /// Keep the window's settings and layout in FILE instead of the user's data folder:
    /// a profile of its own (a file that does not exist yet starts from the defaults).
    #[arg(long, value_name = "FILE", value_parser = args::parse_settings_file)]
    pub settings: Option<PathBuf>,
    #[command(flatten)]
    pub detect: detection::DetectArgs,
}

impl WindowArgs {
    pub fn overrides(&self) -> crate::ui::settings::Overrides {
        crate::ui::settings::Overrides {
            memory_budget_mib: self.memory_budget,
            busy_budget_percent: self.busy_budget,
            record: self.record,
            settings_file: self.settings.clone(),
            detect: self.detect.changes(),
        }
    }
}

/// Which segment: by name in /dev/shm, by process id, or by path.
#[derive(Debug, Clone, Args)]
pub struct TargetArgs {
    /// Segment name in /dev/shm (default: $LUCKY_SHM_NAME).
    #[arg(long, value_name = "NAME", conflicts_with_all = ["pid", "path"])]
    pub shm: Option<String>,
    /// A process id: the engine or client of a segment, or a process that maps one.
    #[arg(long, value_name = "PID", conflicts_with = "path", value_parser = args::parse_pid)]
    pub pid: Option<u32>,
    /// Any file holding a segment.
    #[arg(long, value_name = "FILE")]
    pub path: Option<PathBuf>,
    /// Layout of the segment: detect it, or force one.
    #[arg(long, value_parser = values::layout_choice(), default_value = "auto")]
    pub layout: LayoutChoice,
}

impl TargetArgs {
    /// The target given, else `LUCKY_SHM_NAME`, else none.
    pub fn resolve(&self) -> Option<Target> {
        if let Some(name) = &self.shm {
            Some(Target::Shm(name.clone()))
        } else if let Some(pid) = self.pid {
            Some(Target::Pid(pid))
        } else if let Some(path) = &self.path {
            Some(Target::Path(path.clone()))
        } else {
            std::env::var("LUCKY_SHM_NAME")
                .ok()
                .filter(|n| !n.is_empty())
                .map(Target::Shm)
        }
    }

    pub fn require(&self) -> Result<Target, CliError> {
        self.resolve()
            .ok_or(CliError::Attach(AttachError::NoTarget))
    }
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List every LRBC segment on this machine.
    List {
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print the header, regions, names and a consistent snapshot of a segment.
    Dump {
        #[command(flatten)]
        target: TargetArgs,
        /// Also print this env's observations and actions.
        #[arg(long, value_name = "I")]
        env: Option<u32>,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Follow a segment: state, counters, rates and lag, one line per interval.
    Watch {
        #[command(flatten)]
        target: TargetArgs,
        /// Seconds between lines (at least 0.01; units ms, s, min, h allowed).
        #[arg(
            long,
            value_name = "SECS",
            default_value = "1",
            allow_negative_numbers = true,
            value_parser = args::seconds(0.01)
        )]
        interval: Duration,
        /// Stop after this many lines (at least 1).
        #[arg(long, value_name = "N", value_parser = args::parse_count)]
        count: Option<u64>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// While the machine has no spare CPU, the sampler uses at most this percent of
        /// one core and skips frames to stay within it; 0 follows every frame.
        #[arg(long, value_name = "PCT", default_value_t = lrbc_live::busy::DEFAULT_BUSY_BUDGET_PERCENT, allow_negative_numbers = true, value_parser = args::parse_percent)]
        busy_budget: f32,
        /// Run no detector: the lines carry no event counts (and the check of every
        /// frame's values costs nothing).
        #[arg(long)]
        no_events: bool,
        /// Count no episodes: the lines carry no episode figures.
        #[arg(long)]
        no_episodes: bool,
        #[command(flatten)]
        detect: detection::DetectArgs,
    },
    /// What the detector finds: NaN and infinities (and whether the policy or the
    /// simulator made them), values out of bounds, saturated actions, done bursts,
    /// stalls, the segment's state changes and ring faults; of a live run as they are
    /// found, or of a recording.
    Events(events::EventsArgs),
    /// Two recordings of runs compared frame by frame from each run's start: each env's
    /// first divergence (the value, A's and B's, and whether the policy, the simulator or
    /// the reward started it), and a summary.
    Compare(compare::CompareArgs),
    /// Every env's episodes (length, return, smallest and largest reward, how each ended,
    /// complete or not), of a live run as they end, or of a recording.
    Episodes(episodes::EpisodesArgs),
    /// Decoded command-ring traffic: what is in the rings now, or as it happens.
    Traffic {
        #[command(flatten)]
        target: TargetArgs,
        /// Keep following new entries (until Ctrl-C, --count or --duration).
        #[arg(long)]
        follow: bool,
        /// Which rings.
        #[arg(long, value_parser = values::ring_selection(), default_value = "all")]
        ring: lrbc_live::traffic::RingSelection,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// Stop after this many entries (at least 1).
        #[arg(long, value_name = "N", value_parser = args::parse_count)]
        count: Option<u64>,
        /// Stop after this many seconds (units ms, s, min, h allowed).
        #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = args::positive_seconds)]
        duration: Option<Duration>,
    },
    /// Record frames and ring traffic into an MCAP file (until Ctrl-C, --duration or --max-size).
    Record {
        #[command(flatten)]
        target: TargetArgs,
        /// The MCAP file to write.
        #[arg(long, short, value_name = "FILE")]
        out: PathBuf,
        /// Envs whose frames are recorded, e.g. 0,3,8-11 (default: the first four).
        #[arg(long, value_name = "LIST", value_parser = record::parse_envs, conflicts_with = "all_envs")]
        envs: Option<record::EnvList>,
        /// Record every env.
        #[arg(long)]
        all_envs: bool,
        /// Stop after this many seconds (units ms, s, min, h allowed).
        #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = args::positive_seconds)]
        duration: Option<Duration>,
        /// Stop once the file holds this many MiB.
        #[arg(long, value_name = "MIB", value_parser = record::parse_mib)]
        max_size: Option<u64>,
        /// Record camera images too (image region and streamed camera/viewport frames).
        #[arg(long)]
        images: bool,
        /// While the machine has no spare CPU, the recorder uses at most this percent of
        /// one core and skips frames (counted) to stay within it; 0 records every frame
        /// it can, whatever it costs the run.
        #[arg(long, value_name = "PCT", default_value_t = lrbc_live::busy::DEFAULT_BUSY_BUDGET_PERCENT, allow_negative_numbers = true, value_parser = args::parse_percent)]
        busy_budget: f32,
        #[command(flatten)]
        compression: record::CompressionArgs,
        #[command(flatten)]
        detect: detection::DetectArgs,
    },
    /// Serve the run live over the Foxglove WebSocket protocol, for Foxglove and other
    /// viewers of the protocol (until Ctrl-C or --duration).
    Serve(serve::ServeArgs),
    /// Open a recording made by `record` in the window (or print its summary).
    Open(open::OpenArgs),
    /// Export a recording for analysis: a Parquet (or CSV) row per frame and env.
    Export(export::ExportArgs),
    /// The simulated engine and client.
    #[command(subcommand)]
    Sim(sim::SimCommand),
    /// A simulated engine and client with the inspector attached.
    Demo(demo::DemoArgs),
    /// Toggle an engine service, or show service status, through the control rings.
    Control {
        #[command(flatten)]
        target: TargetArgs,
        /// agent, mujoco, telemetry, scene, camera, viewport or debug (any case).
        #[arg(long, value_name = "NAME")]
        service: String,
        #[command(flatten)]
        action: ControlAction,
        /// Seconds to wait for the engine's response (units ms, s, min, h allowed).
        #[arg(
            long,
            value_name = "SECS",
            default_value = "5",
            allow_negative_numbers = true,
            value_parser = args::positive_seconds
        )]
        timeout: Duration,
        /// Print the response as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Which part of the service to act on.
#[derive(Debug, Clone, Copy, Args)]
#[group(required = true, multiple = false)]
pub struct ControlAction {
    /// Enable the service.
    #[arg(long)]
    pub enable: bool,
    /// Disable the service.
    #[arg(long)]
    pub disable: bool,
    /// Show every service's state and counters.
    #[arg(long)]
    pub status: bool,
}

/// An error for the user: one line, details with `--verbose`.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Attach(#[from] AttachError),
    #[error("{0}")]
    Usage(String),
    /// The detector's options cannot be used (a usage error).
    #[error(transparent)]
    DetectOptions(#[from] lrbc_live::detect::SettingsError),
    /// The detector could not start on the segment.
    #[error(transparent)]
    Detect(#[from] lrbc_live::detect::DiagnosisError),
    /// `serve`'s certificate or key cannot be used.
    #[error(transparent)]
    Tls(#[from] lrbc_remote::protocol::TlsError),
    /// A library's error, already one line with its context.
    #[error(transparent)]
    Control(#[from] lrbc::control::ControlError),
    #[error(transparent)]
    Engine(#[from] lrbc_sim::engine::EngineError),
    #[error(transparent)]
    Client(#[from] lrbc_sim::client::ClientError),
    #[error(transparent)]
    Replay(#[from] lrbc_recording::replay::ReplayError),
    /// A recording damaged beyond where it opened.
    #[error(transparent)]
    Damage(#[from] lrbc_recording::replay::Damage),
    #[error(transparent)]
    Compare(#[from] lrbc_recording::compare::CompareError),
    #[error(transparent)]
    Serve(#[from] lrbc_remote::server::ServeError),
    #[error("{0}")]
    Other(String),
    /// `events --fail-on` found an event of a kind it names: not a failure of the
    /// command, an answer (exit code 3).
    #[error("{0}")]
    Found(String),
}

impl CliError {
    pub fn detail(&self) -> Option<String> {
        match self {
            Self::Attach(e) => e.detail(),
            // Only an attach has details beyond its line.
            _ => None,
        }
    }

    /// Exit code: 2 for usage errors (as clap), 3 for `events --fail-on` finding one, 1
    /// otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Usage(_) | Self::DetectOptions(_) => 2,
            Self::Found(_) => events::FOUND_EXIT_CODE,
            _ => 1,
        }
    }
}

/// Set by Ctrl-C (SIGINT, SIGTERM; Ctrl-C, Ctrl-Break or closing a Windows console);
/// long-running commands and the window poll it and end cleanly.
pub fn stop_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    lrbc_platform::stop_on_interrupt(&flag);
    flag
}

/// `now + d`, or the farthest instant representable for a span too long to add.
pub fn deadline_after(now: Instant, d: Duration) -> Instant {
    now.checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(args::MAX_SECONDS as u64))
}

/// Sleeps up to `d`, waking early when `stop` is set. Returns true if stopped.
pub fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) -> bool {
    let deadline = deadline_after(Instant::now(), d);
    loop {
        // Relaxed: a flag with no data behind it.
        if stop.load(Ordering::Relaxed) {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return false;
        }
        // A tenth of a second: prompt enough for Ctrl-C, and few wakeups of a busy machine.
        std::thread::sleep((deadline - now).min(Duration::from_millis(100)));
    }
}

/// Runs the command line; returns the process exit code.
pub fn main() -> i32 {
    // Before anything prints: on Windows, output goes to the console started from.
    lrbc_platform::attach_to_parent_console();
    // Before any thread exists (glibc's tuning asks for that).
    lrbc_platform::keep_large_allocations_mapped();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage_error(&e),
    };
    // The window under Mesa's software rasteriser on a small machine: one rasterising
    // thread (the window's own, niced) instead of one per core, so that drawing never
    // takes every core from the engine, the trainer and the sampler.
    if matches!(
        cli.command,
        None | Some(Command::Demo(_) | Command::Open(_))
    ) && std::env::var_os("LP_NUM_THREADS").is_none()
        && crate::ui::app::software_rendering_likely()
        && std::thread::available_parallelism().map_or(1, usize::from) <= 4
    {
        lrbc_platform::set_env_at_startup("LP_NUM_THREADS", "0");
    }
    // Reports on stdout end quietly when their reader goes away (`traffic | head`).
    // Processes that own a segment (sim, demo) keep SIGPIPE ignored, so that a closed
    // pipe can never stop them before they clean up.
    if !matches!(cli.command, Some(Command::Sim(_) | Command::Demo(_))) {
        lrbc_platform::default_sigpipe();
    }
    let verbose = cli.verbose;
    match run(cli) {
        Ok(()) => 0,
        Err(e @ CliError::Found(_)) => {
            eprintln!("{e}");
            e.exit_code()
        }
        Err(e) => {
            eprintln!("error: {e}");
            if verbose && let Some(detail) = e.detail() {
                eprintln!("{detail}");
            }
            e.exit_code()
        }
    }
}

/// Parses a command line (without the program name) as `main` would, and checks what
/// every parsed value promises; runs nothing. For the `cli_args` fuzz target.
///
/// # Panics
/// If a value that parsed breaks its bounds (a fuzzing failure).
pub fn check_arguments(args: &[&str]) {
    let argv = std::iter::once("lrbc-inspector").chain(args.iter().copied());
    let Ok(cli) = Cli::try_parse_from(argv) else {
        return;
    };
    let max = Duration::from_secs(args::MAX_SECONDS as u64);
    let target_ok = |t: &TargetArgs| t.pid != Some(0);
    let hz_ok = |hz: f64| hz.is_finite() && Duration::try_from_secs_f64(1.0 / hz).is_ok();
    assert!(target_ok(&cli.target));
    match cli.command {
        Some(Command::Watch {
            target,
            interval,
            count,
            ..
        }) => {
            assert!(target_ok(&target) && count != Some(0));
            assert!(interval >= Duration::from_millis(10) && interval <= max);
            assert!(deadline_after(Instant::now(), interval) > Instant::now());
        }
        Some(Command::Traffic {
            target,
            count,
            duration,
            ..
        }) => {
            assert!(target_ok(&target) && count != Some(0));
            assert!(duration.is_none_or(|d| !d.is_zero() && d <= max));
        }
        Some(Command::Control {
            target, timeout, ..
        }) => {
            assert!(target_ok(&target) && !timeout.is_zero() && timeout <= max);
        }
        Some(Command::Dump { target, .. }) => assert!(target_ok(&target)),
        Some(Command::Sim(sim::SimCommand::Engine(e))) => {
            assert!(hz_ok(e.hz) && hz_ok(e.camera_hz));
            // Only that building the configuration does not panic is checked here.
            let _ = e.config();
        }
        Some(Command::Sim(sim::SimCommand::Client(c))) => {
            assert!(c.hz.is_none_or(hz_ok) && c.steps != Some(0));
            let rollout_ok = |r: lrbc_sim::client::Rollout| {
                r.frames > 0 && r.update <= lrbc_sim::client::Rollout::MAX_UPDATE
            };
            assert!(c.rollout().is_none_or(rollout_ok));
        }
        Some(Command::Demo(d)) => assert!(hz_ok(d.hz)),
        _ => {}
    }
}

/// Help and version as clap prints them; any other argument error as one line on
/// stderr ("error: …", with clap's tip if it has one), exit code 2.
fn usage_error(e: &clap::Error) -> i32 {
    use clap::error::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        // Help and version print as clap prints them; a closed stdout is no reason to fail.
        let _ = e.print();
        return e.exit_code();
    }
    eprintln!("{}", one_line(&e.render().to_string()));
    2
}

/// Clap's message up to its usage section, on one line.
fn one_line(rendered: &str) -> String {
    rendered
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Some(Command::List { json }) => list::run(json),
        Some(Command::Dump { target, env, json }) => {
            dump::run(&target.require()?, target.layout, env, json)
        }
        Some(Command::Watch {
            target,
            interval,
            count,
            json,
            busy_budget,
            no_events,
            no_episodes,
            detect,
        }) => {
            let budget = (busy_budget > 0.0).then_some(busy_budget);
            let detect = if no_events {
                None
            } else {
                Some(detect.settings()?)
            };
            watch::run(
                &target.require()?,
                target.layout,
                watch::WatchOptions {
                    interval,
                    count,
                    json,
                    busy_budget_percent: budget,
                    detect,
                    episodes: !no_episodes,
                },
            )
        }
        Some(Command::Traffic {
            target,
            follow,
            ring,
            json,
            count,
            duration,
        }) => traffic::run(
            &target.require()?,
            target.layout,
            traffic::TrafficOptions {
                follow,
                rings: ring,
                json,
                count,
                duration,
            },
        ),
        Some(Command::Record {
            target,
            out,
            envs,
            all_envs,
            duration,
            max_size,
            images,
            busy_budget,
            compression,
            detect,
        }) => record::run(
            &target.require()?,
            target.layout,
            record::RecordOptions {
                out,
                envs,
                all_envs,
                duration,
                max_bytes: max_size,
                images,
                busy_budget: (busy_budget > 0.0).then_some(busy_budget),
                compression: compression.compression()?,
                detect: detect.settings()?,
            },
        ),
        Some(Command::Serve(args)) => serve::run_args(args),
        Some(Command::Events(args)) => events::run_args(&args),
        Some(Command::Episodes(args)) => episodes::run_args(&args),
        Some(Command::Compare(args)) => compare::run_args(&args),
        Some(Command::Control {
            target,
            service,
            action,
            timeout,
            json,
        }) => {
            let action = if action.enable {
                control::Action::Enable
            } else if action.disable {
                control::Action::Disable
            } else {
                control::Action::Status
            };
            control::run(
                &target.require()?,
                target.layout,
                &service,
                action,
                timeout,
                json,
            )
        }
        Some(Command::Export(args)) => export::run(&args),
        Some(Command::Sim(cmd)) => sim::run(cmd),
        Some(Command::Demo(args)) => demo::run(&args),
        Some(Command::Open(args)) => open::run(&args, cli.window),
        None if !cli.connect.is_empty() => {
            if let Some(path) = &cli.tls_ca {
                let pem = std::fs::read(path).map_err(|e| {
                    CliError::Other(format!("cannot read --tls-ca {}: {e}", path.display()))
                })?;
                lrbc_remote::view::client::trust_certificates(&pem)
                    .map_err(|e| CliError::Other(format!("--tls-ca {}: {e}", path.display())))?;
            }
            crate::ui::run_window_connected(cli.connect.clone(), cli.window.overrides())
                .map_err(CliError::Other)
        }
        None => {
            let target = cli.target.resolve();
            crate::ui::run_window(target, cli.target.layout, cli.window.overrides())
                .map_err(CliError::Other)
        }
    }
}
