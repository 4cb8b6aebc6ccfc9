//! Command-line values that need more than a type: durations, rates, counts and
//! process ids. Each kind has one parser with its bounds and a one-line error, used by
//! every argument of that kind, so no value that parses can panic later (a float too
//! large for `Duration`, a pid that means "nobody").

use std::time::Duration;

/// The longest duration any argument accepts: 30 days.
pub const MAX_SECONDS: f64 = 30.0 * 86_400.0;
/// The highest rate any argument accepts.
pub const MAX_HZ: f64 = 1_000_000.0;
/// The lowest rate any argument accepts (one step every 1,000 seconds).
pub const MIN_HZ: f64 = 0.001;

/// Parses a duration: a number of seconds ("2", "0.25", "1e-3"), or a number with a
/// unit: `ms`, `s`, `min` or `h` ("500ms", "30min"). It must be finite, at least `min`
/// seconds and at most [`MAX_SECONDS`].
pub fn parse_seconds(text: &str, min: f64) -> Result<Duration, String> {
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

/// Parses a limit in Hz: 0 (no limit), or a rate as [`parse_hz`] takes.
pub fn parse_rate(text: &str) -> Result<f64, String> {
    if text.trim().parse::<f64>().is_ok_and(|v| v == 0.0) {
        return Ok(0.0);
    }
    parse_hz(text).map_err(|e| format!("{e} (or 0 for no limit)"))
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

/// Parses the window's settings file: a file (not a folder) in a folder that exists, so
/// that the window can keep its settings there when it closes.
pub fn parse_settings_file(text: &str) -> Result<std::path::PathBuf, String> {
    let path = std::path::PathBuf::from(text);
    if text.trim().is_empty() {
        return Err("must name a file".into());
    }
    if path.is_dir() {
        return Err(format!(
            "{text} is a folder; name a file in it, such as {text}/app.ron"
        ));
    }
    let missing = path
        .parent()
        .filter(|f| !f.as_os_str().is_empty() && !f.is_dir());
    if let Some(folder) = missing {
        return Err(format!(
            "there is no folder {} to keep the settings file in",
            folder.display()
        ));
    }
    Ok(path)
}

/// Parses a count of at least one ("stop after N"): zero would mean "stop before the
/// first", which no command does.
pub fn parse_count(text: &str) -> Result<u64, String> {
    match text.trim().parse::<u64>() {
        Ok(0) => Err("must be at least 1 (leave the option out to run until stopped)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number of at least 1")),
    }
}

/// Parses a process id. Pid 0 is not a process: in a segment's header it means "none",
/// so it can never select one.
/// A server's address: `ws://HOST:PORT` or `wss://HOST:PORT` (the scheme may be left
/// out: `ws://`).
pub fn parse_server(text: &str) -> Result<String, String> {
    lrbc_remote::view::client::normalize(text).map_err(|e| e.to_string())
}

pub fn parse_pid(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(0) => Err("pid 0 is not a process (in a segment's header 0 means \"none\")".into()),
        Ok(pid) => Ok(pid),
        Err(_) => Err(format!("{text:?} is not a process id")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_refuse_what_duration_cannot_hold() {
        assert_eq!(parse_seconds("2", 0.01), Ok(Duration::from_secs(2)));
        assert_eq!(parse_seconds("500ms", 0.01), Ok(Duration::from_millis(500)));
        assert_eq!(parse_seconds("30min", 0.01), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_seconds(" 1h ", 0.01), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_seconds("0.25s", 0.01), Ok(Duration::from_millis(250)));
        // The inputs that used to panic in Duration::from_secs_f64.
        for huge in ["1e20", "1e308", "1e400", "inf", "NaN", "-inf"] {
            let e = parse_seconds(huge, 0.01).unwrap_err();
            assert!(!e.contains('\n'), "one line: {e}");
        }
        assert!(parse_seconds("2592001", 0.01).is_err());
        assert!(parse_seconds("2592000", 0.01).is_ok());
        assert!(parse_seconds("0.001", 0.01).is_err());
        assert!(parse_seconds("-1", 0.0).is_err());
        assert!(parse_seconds("", 0.0).is_err());
        assert!(parse_seconds("5 days", 0.0).is_err());
    }

    #[test]
    fn rates_are_bounded_so_that_their_period_fits_a_duration() {
        assert_eq!(parse_hz("60"), Ok(60.0));
        assert_eq!(parse_hz("1000 Hz"), Ok(1000.0));
        for bad in ["0", "-5", "1e-300", "1e300", "inf", "NaN", "fast"] {
            assert!(parse_hz(bad).is_err(), "{bad} accepted");
        }
        let slowest = parse_hz(&MIN_HZ.to_string()).unwrap();
        assert!(Duration::try_from_secs_f64(1.0 / slowest).is_ok());
    }

    #[test]
    fn counts_and_pids_refuse_zero() {
        assert_eq!(parse_count("3"), Ok(3));
        assert!(parse_count("0").is_err());
        assert!(parse_count("-1").is_err());
        assert_eq!(parse_pid("42"), Ok(42));
        assert!(parse_pid("0").is_err());
        assert!(parse_pid("4294967296").is_err());
    }
}
