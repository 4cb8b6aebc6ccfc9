//! Waiting for the other side on a 2-core machine: spin briefly (lowest latency), then
//! yield the core, then sleep in short naps so that engine, client and inspector all
//! stay responsive.

use std::time::{Duration, Instant};

/// Spin iterations before yielding.
const SPINS: u32 = 2_000;
/// Yield for this long before napping (yielding on an idle core is a busy loop).
const YIELD_FOR: Duration = Duration::from_micros(200);
/// One nap.
const NAP: Duration = Duration::from_micros(50);

/// Back-off state for one wait.
#[derive(Debug)]
pub struct Waiter {
    spins: u32,
    yielding_since: Option<Instant>,
}

impl Default for Waiter {
    fn default() -> Self {
        Self::new()
    }
}

impl Waiter {
    pub fn new() -> Self {
        Self {
            spins: 0,
            yielding_since: None,
        }
    }

    /// Starts over (the awaited thing happened).
    pub fn reset(&mut self) {
        self.spins = 0;
        self.yielding_since = None;
    }

    pub fn spins(&self) -> u32 {
        self.spins
    }

    /// Waits a little: a spin, a yield or a nap depending on how long it has been.
    pub fn wait(&mut self) {
        self.spins = self.spins.saturating_add(1);
        if self.spins < SPINS {
            std::hint::spin_loop();
            return;
        }
        let since = *self.yielding_since.get_or_insert_with(Instant::now);
        if since.elapsed() < YIELD_FOR {
            std::thread::yield_now();
        } else {
            std::thread::sleep(NAP);
        }
    }
}
