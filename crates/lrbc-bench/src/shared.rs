//! What the benchmarks share: their error, the values of their arguments (durations,
//! rates, percents, presets: the conventions of lrbc-inspector's command line), Ctrl-C,
//! and how they print sizes.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use lrbc::attach::AttachError;
use lrbc_recording::export::ExportError;
use lrbc_sim::children::ChildError;
use lrbc_sim::engine::Preset;

/// Why a benchmark failed: one line.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// Arguments that cannot be used together (exit code 2, as clap's).
    #[error("{0}")]
    Usage(String),
    /// The simulated run or ring segment a benchmark needs could not be made.
    #[error(transparent)]
    SimRun(#[from] lrbc_sim::inprocess::SimRunError),
    #[error(transparent)]
    RingSegment(#[from] lrbc_sim::bench::RingSegmentError),
    /// A slow link could not be made.
    #[error(transparent)]
    Link(#[from] lrbc_testkit::netns::NetnsError),
    #[error("{0}")]
    Other(String),
}

impl BenchError {
    /// Exit code: 2 for usage errors (as clap), 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Usage(_) => 2,
            Self::Attach(_)
            | Self::SimRun(_)
            | Self::RingSegment(_)
            | Self::Link(_)
            | Self::Other(_) => 1,
        }
    }
}

impl From<ChildError> for BenchError {
    fn from(e: ChildError) -> Self {
        Self::Other(e.0)
    }
}

/// An error of lrbc-inspector's own code, for the benchmarks that measure the app (its
/// window, its arguments of recording).
impl From<lrbc_inspector::cli::CliError> for BenchError {
    fn from(e: lrbc_inspector::cli::CliError) -> Self {
        if e.exit_code() == 2 {
            Self::Usage(e.to_string())
        } else {
            Self::Other(e.to_string())
        }
    }
}

/// A `watch --json` line that a benchmark could not read.
impl From<lrbc_inspector::cli::watch::WatchLineError> for BenchError {
    fn from(e: lrbc_inspector::cli::watch::WatchLineError) -> Self {
        Self::Other(e.to_string())
    }
}

/// The longest duration any argument accepts: 30 days.
const MAX_SECONDS: f64 = 30.0 * 86_400.0;
/// The highest rate any argument accepts.
const MAX_HZ: f64 = 1_000_000.0;
/// The lowest rate any argument accepts (one step every 1,000 seconds).
const MIN_HZ: f64 = 0.001;

/// Parses a duration: a number of seconds ("2", "0.25", "1e-3"), or a number with a
/// unit: `ms`, `s`, `min` or `h` ("500ms", "30min"). It must be finite, at least `min`
/// seconds and at most [`MAX_SECONDS`].
fn parse_seconds(text: &str, min: f64) -> Result<Duration, String> {
    let t = text.trim();
    let (number, scale) = [("ms", 1e-3), ("min", 60.0), ("h", 3600.0), ("s", 1.0)]
        .iter()
        .find_map(|&(unit, scale)| t.strip_suffix(unit).map(|n| (n.trim_end(), scale)))
        .unwrap_or((t, 1.0));
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds (e.g. 2, 0.5, 500ms, 30min)"))?;
    let secs = value * scale;
    if !secs.is_finite() {
        return Err(format!("{text:?} is not a finite number of seconds"));
    }
    if secs < min {
        return Err(format!("must be at least {min} seconds, not {text}"));
    }
    if secs > MAX_SECONDS {
        return Err(format!(
            "must be at most {MAX_SECONDS} seconds (30 days), not {text}"
        ));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A clap value parser for durations of at least `min` seconds.
pub fn seconds(
    min: f64,
) -> impl Fn(&str) -> Result<Duration, String> + Clone + Send + Sync + 'static {
    move |text| parse_seconds(text, min)
}

/// A clap value parser for durations of at least a millisecond.
pub fn positive_seconds(text: &str) -> Result<Duration, String> {
    parse_seconds(text, 0.001)
}

/// A clap value parser for durations of at least a millisecond, as seconds in an `f64`.
pub fn seconds_f64(text: &str) -> Result<f64, String> {
    parse_seconds(text, 0.001).map(|d| d.as_secs_f64())
}

/// Parses a rate in Hz: finite, from [`MIN_HZ`] to [`MAX_HZ`].
pub fn parse_hz(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let t = t.strip_suffix("Hz").map_or(t, str::trim_end);
    let hz: f64 = t
        .parse()
        .map_err(|_| format!("{text:?} is not a rate in Hz (e.g. 60, 0.5, 1000)"))?;
    if !hz.is_finite() || !(MIN_HZ..=MAX_HZ).contains(&hz) {
        return Err(format!(
            "must be a rate from {MIN_HZ} to {MAX_HZ} Hz, not {text}"
        ));
    }
    Ok(hz)
}

/// Parses a percent of one core, from 0 to 100.
pub fn parse_percent(text: &str) -> Result<f32, String> {
    match text.trim().parse::<f32>() {
        Ok(p) if p.is_finite() && (0.0..=100.0).contains(&p) => Ok(p),
        _ => Err(format!(
            "must be a percent of one core from 0 to 100, not {text}"
        )),
    }
}

/// Parses a server's address (`ws://HOST:PORT`, `wss://…`, or `HOST:PORT`) into its URL.
pub fn parse_server(text: &str) -> Result<String, String> {
    lrbc_remote::view::client::normalize(text).map_err(|e| e.to_string())
}

/// A clap value parser of a simulated engine's [`Preset`], by its name (`train4096`,
/// `cams64`, `cams16`).
pub fn preset() -> impl clap::builder::TypedValueParser<Value = Preset> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(Preset::ALL.map(Preset::as_str)).try_map(
        |name: String| {
            Preset::ALL
                .into_iter()
                .find(|p| p.as_str() == name)
                .ok_or_else(|| format!("{name:?} is not a preset"))
        },
    )
}

/// Set by Ctrl-C (SIGINT, SIGTERM; Ctrl-C or Ctrl-Break in a Windows console): a
/// benchmark polls it and ends cleanly.
pub fn stop_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    lrbc_platform::stop_on_interrupt(&flag);
    flag
}

/// Sleeps up to `d`, waking early when `stop` is set. Returns true if stopped.
pub fn sleep_unless_stopped(d: Duration, stop: &AtomicBool) -> bool {
    let now = Instant::now();
    let deadline = now
        .checked_add(d)
        .unwrap_or_else(|| now + Duration::from_secs(MAX_SECONDS as u64));
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

/// Bytes as MB (10^6), for the rates printed.
pub fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// The error of an export of `input` to `out`, as one line naming the file at fault.
pub fn export_error(e: &ExportError, input: &Path, out: &Path) -> BenchError {
    let file = if matches!(e, ExportError::Output(_)) {
        out
    } else {
        input
    };
    match e {
        ExportError::NoSuchEnv { .. } => BenchError::Other(e.to_string()),
        _ => BenchError::Other(format!("{}: {e}", file.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_rates_parse_as_the_inspector_s_arguments_do() {
        assert_eq!(seconds_f64("30min"), Ok(1800.0));
        assert_eq!(positive_seconds("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(seconds(0.0)("0"), Ok(Duration::ZERO));
        for bad in ["1e400", "NaN", "-1", "2592001", "0.0001", "5 days"] {
            assert!(seconds_f64(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(parse_hz("1000 Hz"), Ok(1000.0));
        for bad in ["0", "1e-300", "1e300", "inf", "fast"] {
            assert!(parse_hz(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(parse_percent("12.5"), Ok(12.5));
        assert!(parse_percent("101").is_err());
    }

    #[test]
    fn presets_parse_by_their_names() {
        use clap::builder::TypedValueParser as _;
        let cmd = clap::Command::new("bench");
        for p in Preset::ALL {
            let parsed = preset().parse_ref(&cmd, None, std::ffi::OsStr::new(p.as_str()));
            assert_eq!(parsed.ok(), Some(p));
        }
        assert!(
            preset()
                .parse_ref(&cmd, None, std::ffi::OsStr::new("huge"))
                .is_err()
        );
    }
}
