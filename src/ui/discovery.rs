//! The attach view's discovery thread: [`Discovery`] refreshes a [`Listing`] of the
//! machine's LRBC segments and the processes that map them (`lrbc::discovery`'s
//! scanning) every two seconds while the view shows.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lrbc::clock::monotonic_now_ns;
use lrbc::discovery::{ListEntry, list, mappers};
use lrbc::procinfo::{ProcInfo, Processes};

/// What discovery found.
#[derive(Clone, Debug, Default)]
pub struct Listing {
    pub segments: Vec<ListEntry>,
    /// Processes that map each segment (from /proc/*/maps).
    pub mappers: BTreeMap<String, Vec<ProcInfo>>,
    pub refreshes: u64,
}

/// How often the listing is refreshed while the attach view shows.
const LIST_EVERY_NS: u64 = 2_000_000_000;

/// A named thread that refreshes a [`Listing`] every two seconds while asked to (the
/// window's attach view shows).
#[derive(Debug)]
pub struct Discovery {
    pub listing: Arc<Mutex<Listing>>,
    active: Arc<AtomicBool>,
    /// Set to refresh at once (when the view is shown again).
    refresh_now: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Discovery {
    pub fn start(waker: Arc<dyn Fn() + Send + Sync>) -> Self {
        let listing = Arc::new(Mutex::new(Listing::default()));
        let active = Arc::new(AtomicBool::new(true));
        let refresh_now = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (l, a, s, r) = (
            Arc::clone(&listing),
            Arc::clone(&active),
            Arc::clone(&stop),
            Arc::clone(&refresh_now),
        );
        let thread = std::thread::Builder::new()
            .name("lrbc-discovery".into())
            .spawn(move || {
                let mut processes = Processes::new();
                // Relaxed: flags with no data behind them.
                while !s.load(Ordering::Relaxed) {
                    if a.load(Ordering::Relaxed) {
                        let segments = list();
                        let mappers = mappers(&mut processes);
                        if let Ok(mut g) = l.lock() {
                            g.segments = segments;
                            g.mappers = mappers;
                            g.refreshes += 1;
                        }
                        waker();
                    }
                    // Asleep until the next listing, unless woken to stop or to list now
                    // (a wakeup a tenth of a second would be paid for by a busy run).
                    let next = monotonic_now_ns() + LIST_EVERY_NS;
                    loop {
                        if s.load(Ordering::Relaxed) {
                            return;
                        }
                        if r.swap(false, Ordering::Relaxed) {
                            break;
                        }
                        let now = monotonic_now_ns();
                        if now >= next {
                            break;
                        }
                        std::thread::park_timeout(Duration::from_nanos(next - now));
                    }
                }
            })
            .ok();
        Self {
            listing,
            active,
            refresh_now,
            stop,
            thread,
        }
    }

    /// Lists only while the attach view shows; showing it again lists at once.
    pub fn set_active(&self, on: bool) {
        // Relaxed: flags with no data behind them.
        if self.active.swap(on, Ordering::Relaxed) != on && on {
            self.refresh_now.store(true, Ordering::Relaxed);
            self.wake();
        }
    }

    /// Wakes the thread to look at its flags (set before: the unpark orders them).
    fn wake(&self) {
        if let Some(t) = &self.thread {
            t.thread().unpark();
        }
    }

    pub fn snapshot(&self) -> Listing {
        self.listing.lock().map(|g| g.clone()).unwrap_or_default()
    }
}

impl Drop for Discovery {
    fn drop(&mut self) {
        // Relaxed: a flag with no data behind it.
        self.stop.store(true, Ordering::Relaxed);
        self.wake();
        if let Some(t) = self.thread.take() {
            // Only waits for the thread's end: a panic in it was printed when it happened.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn showing_the_view_again_lists_at_once_and_stopping_is_prompt() {
        use std::time::Instant;
        let d = Discovery::start(Arc::new(|| {}));
        let listed = |n: u64| {
            let deadline = Instant::now() + Duration::from_secs(20);
            while d.snapshot().refreshes < n {
                assert!(Instant::now() < deadline, "no listing {n} within 20 s");
                std::thread::sleep(Duration::from_millis(2));
            }
        };
        listed(1);
        // Hidden and shown again: a listing now, not at the next one due.
        d.set_active(false);
        d.set_active(true);
        let shown = Instant::now();
        listed(2);
        let waited = shown.elapsed();
        assert!(
            waited < Duration::from_nanos(LIST_EVERY_NS / 2),
            "listed {waited:?} after being shown again"
        );
        // The thread sleeps between listings and is woken to stop.
        let stopping = Instant::now();
        drop(d);
        let took = stopping.elapsed();
        assert!(
            took < Duration::from_nanos(LIST_EVERY_NS / 2),
            "the thread took {took:?} to stop"
        );
    }
}
