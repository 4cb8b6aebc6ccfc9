//! [`TrafficTap`]: a named thread that reads every ring of a segment with a
//! [`Traffic`] and fills a bounded [`TrafficStore`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use super::{PollPace, RingSelection, Traffic, TrafficEvent, TrafficLimits, TrafficStore};
use lrbc::attach::{Target, attach};
use lrbc::clock::monotonic_now_ns;
use lrbc::layout::LayoutChoice;
use lrbc::sync::lock;

/// How often the tap asks whether the session's observers are yielding to a busy
/// machine.
const YIELDING_ASK_NS: u64 = 250_000_000;

/// A thread that reads the rings and fills a [`TrafficStore`]. While `yielding`
/// says the session's observers hold off on a busy machine (the frame follower's
/// budget), it naps longer between polls of quiet rings.
#[derive(Debug)]
pub struct TrafficTap {
    pub store: Arc<Mutex<TrafficStore>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Told of every traffic event as it is read, with the time it was read (the session's
/// detector takes the faults).
pub type OnTraffic = Box<dyn FnMut(&TrafficEvent, u64) + Send>;

impl TrafficTap {
    pub fn start(
        target: &Target,
        choice: LayoutChoice,
        limits: Arc<Mutex<TrafficLimits>>,
        waker: Arc<dyn Fn() + Send + Sync>,
        yielding: Arc<dyn Fn() -> bool + Send + Sync>,
        mut on_traffic: Option<OnTraffic>,
    ) -> std::io::Result<Self> {
        let store = Arc::new(Mutex::new(TrafficStore::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (target, s, st) = (target.clone(), Arc::clone(&store), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("lrbc-traffic".into())
            .spawn(move || {
                // An observer: it runs in the time the engine and trainer leave over.
                lrbc_platform::set_thread_role(lrbc_platform::ThreadRole::Background);
                let a = match attach(&target, choice) {
                    Ok(a) => a,
                    Err(e) => {
                        lock(&s).error = Some(e.to_string());
                        return;
                    }
                };
                let mut traffic = Traffic::new(&a, RingSelection::All);
                let mut events = Vec::new();
                let mut idle = 0u32;
                let mut pace = PollPace::default();
                let mut asked_ns: Option<u64> = None;
                // Relaxed: a flag with no data behind it.
                while !st.load(Ordering::Relaxed) {
                    events.clear();
                    let now = monotonic_now_ns();
                    if asked_ns.is_none_or(|t| now.saturating_sub(t) >= YIELDING_ASK_NS) {
                        asked_ns = Some(now);
                        pace.set_busy(yielding());
                    }
                    traffic.poll(&a.segment, now, 4096, &mut events);
                    if events.is_empty() {
                        idle = idle.saturating_add(1);
                        std::thread::sleep(pace.after_poll(false));
                        if idle.is_multiple_of(100) {
                            lock(&s).totals = traffic.totals();
                        }
                        continue;
                    }
                    idle = 0;
                    // Entries came: poll again at once, and nap short once quiet.
                    let _ = pace.after_poll(true);
                    if let Some(f) = &mut on_traffic {
                        for e in &events {
                            f(e, now);
                        }
                    }
                    let limits = *lock(&limits);
                    let mut store = lock(&s);
                    for e in events.drain(..) {
                        store.apply(e, now, limits);
                    }
                    store.totals = traffic.totals();
                    drop(store);
                    waker();
                }
            })?;
        Ok(Self {
            store,
            stop,
            thread: Some(thread),
        })
    }

    pub fn lock(&self) -> MutexGuard<'_, TrafficStore> {
        lock(&self.store)
    }
}

impl Drop for TrafficTap {
    fn drop(&mut self) {
        // Relaxed: a flag with no data behind it.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            // Only waits for the thread's end: a panic in it was printed when it happened.
            let _ = t.join();
        }
    }
}
