//! How much a client's connection may hold unacknowledged: enough to keep its link busy,
//! little enough that what waits in the link's queues is a fraction of a second. The
//! link's rate is measured from the bytes the peer acknowledges; the budget is that rate
//! times the path's shortest round trip plus [`TARGET_QUEUE_NS`]. Pure: the caller gives
//! the time and what the socket says.

use lrbc_platform::TcpLink;

/// What may wait in the link's queues beyond its round trip, as time at its rate.
pub const TARGET_QUEUE_NS: u64 = 40_000_000;
/// The budget never goes below this (one small frame passes at any rate).
pub const MIN_BUDGET: u64 = 16 * 1024;
/// The budget before the link's rate is known.
pub const FIRST_BUDGET: u64 = 64 * 1024;
/// How often the rate is measured.
pub const SAMPLE_NS: u64 = 100_000_000;

/// The measured link and the budget it gives.
#[derive(Clone, Debug, Default)]
pub struct LinkBudget {
    /// The link's rate, bytes/s (None until measured).
    rate: Option<f64>,
    /// The acknowledged total at the last sample, and its time.
    last: Option<(u64, u64)>,
    /// Whether the sender held a message back (for the budget or a full socket) since
    /// the last sample: then the acknowledgements measure the link, not the sender.
    held: bool,
    /// Bytes acknowledged a second over the last sample.
    delivered: f64,
}

impl LinkBudget {
    /// The bytes the connection may hold unacknowledged now.
    pub fn bytes(&self, link: &TcpLink) -> u64 {
        let Some(rate) = self.rate else {
            return FIRST_BUDGET;
        };
        let window_ns = u64::from(link.min_rtt_us) * 1_000 + TARGET_QUEUE_NS;
        ((rate * window_ns as f64 / 1e9) as u64).max(MIN_BUDGET)
    }

    /// Whether another message may be written now.
    pub fn allows(&self, link: &TcpLink) -> bool {
        link.queued < self.bytes(link)
    }

    /// The sender has a message it does not write now.
    pub fn held_back(&mut self) {
        self.held = true;
    }

    /// Measures the link at `now` from what the socket says.
    pub fn sample(&mut self, now: u64, link: &TcpLink) {
        let Some((t0, acked0)) = self.last else {
            self.last = Some((now, link.acked));
            return;
        };
        let dt = now.saturating_sub(t0);
        if dt < SAMPLE_NS {
            return;
        }
        let r = link.acked.saturating_sub(acked0) as f64 * 1e9 / dt as f64;
        self.delivered = r;
        self.rate = if self.held {
            // Held back: the link was the limit; follow it, up or down.
            Some(self.rate.map_or(r, |old| 0.5 * old + 0.5 * r))
        } else {
            // The sender was the limit: the link carries at least this much.
            Some(self.rate.map_or(r, |old| old.max(r)))
        };
        self.held = false;
        self.last = Some((now, link.acked));
    }

    /// The link's measured rate, bytes/s (what the peer acknowledged over the last
    /// sample).
    pub fn delivered(&self) -> f64 {
        self.delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// A link of `rate` bytes/s with a queue in front of it, fed by a sender that
    /// writes `message` bytes whenever the budget allows; returns the budget's rate
    /// estimate and the longest queueing delay seen after the first second.
    fn run(rate: f64, message: u64, min_rtt_us: u32) -> (f64, f64) {
        let mut b = LinkBudget::default();
        let mut queued: u64 = 0;
        let mut acked: u64 = 0;
        let mut worst: f64 = 0.0;
        let step = MS;
        let mut carry = 0.0;
        for t in 0..5_000u64 {
            let now = t * step;
            carry += rate * step as f64 / 1e9;
            let sent = (carry as u64).min(queued);
            carry -= sent as f64;
            if queued == 0 {
                carry = 0.0;
            }
            queued -= sent;
            acked += sent;
            let link = TcpLink {
                queued,
                acked,
                rtt_us: min_rtt_us,
                min_rtt_us,
            };
            b.sample(now, &link);
            if b.allows(&link) {
                queued += message;
            } else {
                b.held_back();
            }
            if t > 1_000 {
                worst = worst.max(queued as f64 / rate);
            }
        }
        (b.rate.unwrap_or(0.0), worst)
    }

    #[test]
    fn the_budget_finds_a_slow_link_s_rate_and_keeps_its_queue_short() {
        // 5 Mbit/s, 30 kB messages (a train4096 frame).
        let (rate, worst) = run(625_000.0, 30_000, 100);
        assert!((500_000.0..=700_000.0).contains(&rate), "{rate}");
        assert!(worst < 0.15, "queueing delay {worst} s");
    }

    #[test]
    fn a_fast_link_is_not_held_to_the_first_budget() {
        // 100 Mbit/s with a 20 ms round trip: the pipe holds 250 kB.
        let (rate, _) = run(12_500_000.0, 30_000, 20_000);
        assert!(rate > 10_000_000.0, "{rate}");
    }

    #[test]
    fn an_unmeasured_link_has_the_first_budget_and_a_measured_one_never_less_than_the_least() {
        let mut b = LinkBudget::default();
        let idle = TcpLink::default();
        assert_eq!(b.bytes(&idle), FIRST_BUDGET);
        b.sample(0, &idle);
        b.sample(SAMPLE_NS, &idle);
        assert_eq!(b.bytes(&idle), MIN_BUDGET, "an idle link measured nothing");
        assert_eq!(b.delivered(), 0.0);
    }
}
