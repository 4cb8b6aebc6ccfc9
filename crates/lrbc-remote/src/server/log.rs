//! `serve`'s log: one line per event on standard error, `serve: …`, written by a thread
//! of its own. A standard error nobody reads (a paused terminal, a stalled pipe to a log
//! collector) then holds up that thread alone, never serving or its shutdown: a line
//! that finds the log's queue full is counted, and the count is written when the queue
//! drains. One client's repeated errors of one kind are one line a second with a count
//! ([`Repeats`]).

use std::io::Write as _;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Lines waiting for standard error at most.
const QUEUE: usize = 1024;

struct Log {
    tx: crossbeam_channel::Sender<String>,
    /// Lines that found the queue full, not yet reported.
    dropped: AtomicU64,
    /// Lines queued, and lines written (or given up), for [`flush`].
    queued: AtomicU64,
    done: AtomicU64,
}

static LOG: OnceLock<Option<Log>> = OnceLock::new();

fn log() -> Option<&'static Log> {
    LOG.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::bounded::<String>(QUEUE);
        std::thread::Builder::new()
            .name("serve-log".into())
            .spawn(move || {
                for text in rx {
                    let mut err = std::io::stderr().lock();
                    // A closed stderr is no reason to stop.
                    let _ = writeln!(err, "serve: {text}");
                    if let Some(l) = LOG.get().and_then(Option::as_ref) {
                        // Relaxed: counters read for a report, no data behind them.
                        let lost = l.dropped.swap(0, Ordering::Relaxed);
                        if lost > 0 {
                            // A closed stderr is no reason to stop.
                            let _ = writeln!(
                                err,
                                "serve: {lost} log lines dropped (standard error was not read)"
                            );
                        }
                        // Release: pairs with the Acquire load in `flush`.
                        l.done.fetch_add(1, Ordering::Release);
                    }
                }
            })
            .ok()?;
        Some(Log {
            tx,
            dropped: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            done: AtomicU64::new(0),
        })
    })
    .as_ref()
}

/// Writes `text` as a line of the log, `serve: text`; never waits.
pub fn line(text: impl Into<String>) {
    let text = text.into();
    let Some(l) = log() else {
        return;
    };
    // Relaxed: counters with no data behind them (the text goes through the channel).
    l.queued.fetch_add(1, Ordering::Relaxed);
    if l.tx.try_send(text).is_err() {
        l.queued.fetch_sub(1, Ordering::Relaxed);
        l.dropped.fetch_add(1, Ordering::Relaxed);
    }
}

/// Waits up to `timeout` for the lines written so far to reach standard error (at the
/// end of `serve`); true when they did.
pub fn flush(timeout: Duration) -> bool {
    let Some(l) = log() else {
        return true;
    };
    let deadline = Instant::now() + timeout;
    // Relaxed for `queued` (a count only); Acquire pairs with the writer's Release.
    while l.done.load(Ordering::Acquire) < l.queued.load(Ordering::Relaxed) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

/// One client's errors of each kind: the first of a second is a line at once, the rest
/// of that second one line with their count.
#[derive(Debug)]
pub struct Repeats {
    who: String,
    /// The second being counted, ns.
    since: u64,
    /// Per kind: repeats held back this second, and the last one's text.
    held: Vec<(&'static str, u64, String)>,
}

impl Repeats {
    pub fn new(who: impl Into<String>) -> Self {
        Self {
            who: who.into(),
            since: 0,
            held: Vec::new(),
        }
    }

    /// An error of `kind` at `now` (ns): its line, if it is to be written now.
    pub fn note(&mut self, now: u64, kind: &'static str, text: &str) -> Option<String> {
        let mut out = self.tick(now);
        match self.held.iter_mut().find(|h| h.0 == kind) {
            Some(h) => {
                h.1 += 1;
                h.2 = text.to_string();
            }
            None => {
                self.held.push((kind, 0, String::new()));
                out.push(format!("{}: {text}", self.who));
            }
        }
        (!out.is_empty()).then(|| out.join("\n"))
    }

    /// The lines of the second that ended, if one did by `now`; the counting starts
    /// again.
    pub fn tick(&mut self, now: u64) -> Vec<String> {
        if now.saturating_sub(self.since) < 1_000_000_000 {
            return Vec::new();
        }
        self.since = now;
        let who = &self.who;
        self.held
            .drain(..)
            .filter(|h| h.1 > 0)
            .map(|(kind, n, last)| {
                format!("{who}: {n} more {kind} in the last second; the last: {last}")
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn a_flood_of_one_kind_is_one_line_and_a_count_a_second() {
        let mut r = Repeats::new("client 1.2.3.4:5");
        let mut lines = Vec::new();
        for i in 0..100_000u64 {
            lines.extend(r.note(S + i, "unknown channels", &format!("channel {i}")));
        }
        lines.extend(r.tick(2 * S + 1));
        assert_eq!(
            lines,
            [
                "client 1.2.3.4:5: channel 0",
                "client 1.2.3.4:5: 99999 more unknown channels in the last second; the last: channel 99999",
            ]
        );
        // Another kind in the same second has its own first line.
        assert!(r.note(2 * S + 2, "bad json", "x").is_some());
        assert!(r.note(2 * S + 3, "bad json", "y").is_none());
        assert!(r.note(2 * S + 4, "unknown channels", "z").is_some());
    }

    #[test]
    fn lines_are_written_and_flushed() {
        line("a test line of the log");
        assert!(flush(Duration::from_secs(5)));
    }
}
