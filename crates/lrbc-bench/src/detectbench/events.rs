//! An `events --json` process attached to a run: started, interrupted, and read to its
//! end (its events, the frames it checked, its CPU).

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;

use crate::shared::BenchError;
use lrbc_sim::children::inspector_exe;

/// What one `events` process printed and used.
#[derive(Clone, Debug, Default)]
pub(super) struct EventsOutcome {
    /// Its events, as the JSON objects it printed (the last form of each).
    pub(super) events: Vec<serde_json::Value>,
    /// Frames it saw, checked whole, and whose rewards and flags it checked.
    pub(super) seen: u64,
    pub(super) checked: u64,
    pub(super) flags_checked: u64,
    /// CPU seconds of the whole process.
    pub(super) cpu_secs: f64,
}

/// `checked 10,016 of 10,029 frames (rewards and flags of 10,020)` of `events`' summary
/// line: (checked, seen, rewards and flags checked).
fn parse_summary(line: &str) -> Option<(u64, u64, u64)> {
    let number = |s: &str| s.replace(',', "").parse::<u64>().ok();
    let rest = &line[line.find("checked ")? + "checked ".len()..];
    let mut words = rest.split_whitespace();
    let checked = number(words.next()?)?;
    (words.next()? == "of").then_some(())?;
    let seen = number(words.next()?)?;
    let flags = rest
        .find("rewards and flags of ")
        .and_then(|i| {
            let tail = &rest[i + "rewards and flags of ".len()..];
            number(tail.trim_end_matches(|c: char| !c.is_ascii_digit()))
        })
        .unwrap_or(checked);
    Some((checked, seen, flags.max(checked)))
}

/// Reads a child's pipe to its end on a thread of its own, so that neither pipe fills
/// while the other is read.
fn read_all(
    pipe: Option<impl Read + Send + 'static>,
    thread: &str,
) -> Result<Option<JoinHandle<String>>, BenchError> {
    let Some(mut pipe) = pipe else {
        return Ok(None);
    };
    std::thread::Builder::new()
        .name(thread.into())
        .spawn(move || {
            let mut text = String::new();
            // A read cut short leaves the text short, and parsing it says so.
            let _ = pipe.read_to_string(&mut text);
            text
        })
        .map(Some)
        .map_err(|e| BenchError::Other(format!("cannot start a reader: {e}")))
}

/// An `events --json` process, its output read as it goes; ended (SIGKILL) if dropped
/// before [`EventsProcess::finish`].
#[derive(Debug)]
pub(super) struct EventsProcess {
    child: Option<Child>,
    stdout: Option<JoinHandle<String>>,
    stderr: Option<JoinHandle<String>>,
}

impl EventsProcess {
    /// `events --shm NAME --json`, for `secs` or until [`EventsProcess::interrupt`].
    pub(super) fn start(name: &str, secs: Option<f64>) -> Result<Self, BenchError> {
        let mut command = Command::new(inspector_exe()?);
        lrbc_platform::terminate_with_parent(&mut command);
        command.args(["events", "--shm", name, "--json"]);
        if let Some(secs) = secs {
            command.args(["--secs", &secs.to_string()]);
        }
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| BenchError::Other(format!("cannot start events: {e}")))?;
        let stdout = read_all(child.stdout.take(), "bench-events-out")?;
        let stderr = read_all(child.stderr.take(), "bench-events-err")?;
        Ok(Self {
            child: Some(child),
            stdout,
            stderr,
        })
    }

    /// Ctrl-C: it prints what it found and its summary, and ends.
    pub(super) fn interrupt(&self) {
        if let Some(child) = &self.child {
            lrbc_platform::send_signal(child.id(), lrbc_platform::Signal::Interrupt);
        }
    }

    /// Waits for its end: its events, its summary's counts and its CPU.
    pub(super) fn finish(mut self) -> Result<EventsOutcome, BenchError> {
        let Some(mut child) = self.child.take() else {
            return Err(BenchError::Other("events was not started".into()));
        };
        let (code, usage) = lrbc_platform::wait_with_usage(&mut child)
            .map_err(|e| BenchError::Other(format!("events: {e}")))?;
        let join =
            |h: Option<JoinHandle<String>>| h.and_then(|h| h.join().ok()).unwrap_or_default();
        let (out, err) = (join(self.stdout.take()), join(self.stderr.take()));
        if code != Some(0) {
            let last = err.lines().last().unwrap_or_default();
            return Err(BenchError::Other(format!(
                "events ended with {code:?}: {last}"
            )));
        }
        let events = out
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l)
                    .map_err(|e| BenchError::Other(format!("events printed {l:?}: {e}")))
            })
            .collect::<Result<Vec<serde_json::Value>, _>>()?;
        let summary = err
            .lines()
            .rev()
            .find(|l| l.starts_with("events: "))
            .unwrap_or_default();
        let (checked, seen, flags_checked) = parse_summary(summary).unwrap_or_default();
        Ok(EventsOutcome {
            events: last_forms(events),
            seen,
            checked,
            flags_checked,
            cpu_secs: usage.cpu_secs,
        })
    }
}

impl Drop for EventsProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // It may have exited already.
            let _ = child.kill();
            // Reaped; its status does not matter here.
            let _ = child.wait();
        }
    }
}

/// One form of each event (an event printed as going on and again when it ended is one
/// event): the last printed.
fn last_forms(events: Vec<serde_json::Value>) -> Vec<serde_json::Value> {
    let mut out: Vec<serde_json::Value> = Vec::new();
    for e in events {
        match out.iter_mut().find(|o| o["id"] == e["id"]) {
            Some(o) => *o = e,
            None => out.push(e),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_gives_the_frames_checked_and_seen() {
        assert_eq!(
            parse_summary("events: 1 (nonfinite 1); checked 10,016 of 10,029 frames"),
            Some((10_016, 10_029, 10_016))
        );
        assert_eq!(
            parse_summary(
                "events: 0; checked 1,016 of 10,029 frames (rewards and flags of 10,020)"
            ),
            Some((1_016, 10_029, 10_020))
        );
        assert_eq!(parse_summary("events: 0"), None);
    }
}
