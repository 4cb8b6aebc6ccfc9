//! Yielding to a busy machine. An observer that takes CPU from a saturated machine
//! slows the run it observes: on two cores with engine and trainer busy-waiting, every
//! wakeup of an observer is paid for by the run. So while the machine has no spare CPU,
//! an observer (the window's sampler, the recorder) keeps its own CPU time within a
//! budget (a share of one core) by sleeping between samples, and takes at most one
//! sample per repaint of its reader (a wakeup costs the run a context switch whatever the
//! thread then does, and in lock-step a stalled engine or trainer stalls the other too);
//! the frames that pass meanwhile are counted as skipped. With spare CPU it follows every
//! frame.

/// The budget of an observer on a busy machine, percent of one core, unless set.
pub const DEFAULT_BUSY_BUDGET_PERCENT: f32 = 1.0;
/// The window's budget unless set: its follower feeds the plots and the flight recorder,
/// whose work on each frame (on a thread of its own) comes on top of the follower's, and
/// half of [`DEFAULT_BUSY_BUDGET_PERCENT`] keeps the two within about 1 % of a core.
pub const WINDOW_BUSY_BUDGET_PERCENT: f32 = 0.5;

/// Spare CPU (in cores, averaged over a check) below which the machine is busy.
const BUSY_BELOW_CORES: f64 = 0.25;
/// The observer's own CPU (in cores) from which, when it is more than the machine leaves
/// spare, the machine is busy: following every frame, an observer with work to do on
/// each (the detector's checks of every value) takes the CPU an unpaced engine and
/// trainer would use, and they wait on each other in the time it leaves them: spare CPU
/// that is not spare.
const OWN_COMPETES_FROM_CORES: f64 = 0.05;
/// Spare CPU above which a busy machine is no longer busy (hysteresis)...
const IDLE_ABOVE_CORES: f64 = 0.5;
/// ...in this many readings in a row (a second): an engine and trainer that wait on each
/// other nap when the machine stalls them, and that idle time is no spare CPU.
const IDLE_READINGS: u32 = 4;
/// How often the machine's load is read.
pub const CHECK_INTERVAL_NS: u64 = 250_000_000;
/// The longest hold between two samples.
const MAX_HOLD_NS: u64 = 100_000_000;
/// How often at most an observer's threads wake the window while the machine is busy: it
/// redraws at most [`BUSY_READER_WAKE_NS`] apart then, and each wakeup of a thread is
/// paid for by the run.
pub const BUSY_READER_WAKE_NS: u64 = 100_000_000;
/// The shortest hold between two samples while yielding, whatever the reader's rate:
/// 100 samples a second at most.
pub const MIN_HOLD_NS: u64 = 10_000_000;

pub use lrbc_platform::CpuTimes;

/// The machine's CPU time now (None where the platform does not say).
pub fn read_cpu_times() -> Option<CpuTimes> {
    lrbc_platform::cpu_times()
}

/// Spare cores between two readings, or None when no time passed.
pub fn spare_cores(prev: CpuTimes, cur: CpuTimes) -> Option<f64> {
    let total = cur.total.checked_sub(prev.total)?;
    let idle = cur.idle.checked_sub(prev.idle)?;
    (total > 0).then(|| idle.min(total) as f64 / total as f64 * cur.cores as f64)
}

/// Whether the machine is busy, and how long the frame thread holds off between samples
/// while it is.
#[derive(Debug)]
pub struct CpuBudget {
    /// Share of one core the frame thread may use on a busy machine; None: no limit.
    share: Option<f64>,
    busy: bool,
    /// Readings in a row with spare CPU while busy.
    idle_readings: u32,
    last_times: Option<CpuTimes>,
    last_check_ns: Option<u64>,
    /// The shortest hold between samples while yielding.
    min_hold_ns: u64,
    /// The thread's CPU time at the last sample.
    cpu_at_sample: Option<u64>,
    /// No sample before this time (while busy).
    hold_until_ns: u64,
    /// The observer's own CPU time and the time at the last reading.
    last_own: Option<(u64, u64)>,
    /// The hold a sample cost beyond the longest hold: paid off by the holds after it,
    /// during which the samples leave out their costly part (see
    /// [`CpuBudget::costly_work_fits`]).
    owed_ns: u64,
}

impl CpuBudget {
    /// `percent_of_a_core`: None never yields. `min_hold_ns`: the reader's repaint
    /// interval (no more than one sample per repaint while yielding), at least
    /// [`MIN_HOLD_NS`] and at most the longest hold.
    pub fn new(percent_of_a_core: Option<f32>, min_hold_ns: u64) -> Self {
        let mut b = Self {
            share: None,
            min_hold_ns: min_hold_ns.clamp(MIN_HOLD_NS, MAX_HOLD_NS),
            busy: false,
            idle_readings: 0,
            last_times: None,
            last_check_ns: None,
            cpu_at_sample: None,
            hold_until_ns: 0,
            last_own: None,
            owed_ns: 0,
        };
        b.set_percent(percent_of_a_core);
        b
    }

    /// The reader's repaint interval changed (see [`CpuBudget::new`]).
    pub fn set_min_hold_ns(&mut self, min_hold_ns: u64) {
        self.min_hold_ns = min_hold_ns.clamp(MIN_HOLD_NS, MAX_HOLD_NS);
    }

    pub fn set_percent(&mut self, percent_of_a_core: Option<f32>) {
        self.share = percent_of_a_core
            .filter(|p| p.is_finite() && *p > 0.0)
            .map(|p| f64::from(p.min(100.0)) / 100.0);
        if self.share.is_none() {
            self.hold_until_ns = 0;
        }
    }

    /// True while the machine is busy and a budget is set: the thread is yielding.
    pub fn yielding(&self) -> bool {
        self.busy && self.share.is_some()
    }

    /// Whether it is time to read the machine's load again.
    pub fn check_due(&self, now_ns: u64) -> bool {
        self.last_check_ns
            .is_none_or(|t| now_ns.saturating_sub(t) >= CHECK_INTERVAL_NS)
    }

    /// A reading of the machine's CPU times and of the observer's own CPU time
    /// (`own_cpu_ns`, its thread's; None: not known), taken at `now_ns`. The machine is busy when it has
    /// less than a quarter of a core spare, or when the observer takes more than it
    /// leaves spare.
    pub fn observe(&mut self, now_ns: u64, times: Option<CpuTimes>, own_cpu_ns: Option<u64>) {
        self.last_check_ns = Some(now_ns);
        let own_cores = match (self.last_own, own_cpu_ns) {
            (Some((t, c)), Some(own)) if now_ns > t => {
                own.saturating_sub(c) as f64 / (now_ns - t) as f64
            }
            _ => 0.0,
        };
        self.last_own = own_cpu_ns.map(|c| (now_ns, c));
        let Some(cur) = times else {
            // No /proc/stat: never busy.
            self.busy = false;
            return;
        };
        if let Some(spare) = self.last_times.and_then(|prev| spare_cores(prev, cur)) {
            if self.busy {
                self.idle_readings = if spare > IDLE_ABOVE_CORES {
                    self.idle_readings + 1
                } else {
                    0
                };
                if self.idle_readings >= IDLE_READINGS {
                    self.busy = false;
                    self.hold_until_ns = 0;
                }
            } else if spare < BUSY_BELOW_CORES
                || (own_cores > OWN_COMPETES_FROM_CORES && own_cores > spare)
            {
                self.busy = true;
                self.idle_readings = 0;
            }
        }
        self.last_times = Some(cur);
    }

    /// A sample was taken at `now_ns`, the thread's CPU time being `thread_cpu_ns`: while
    /// yielding, the next one waits until the CPU used since the last sample (the sample
    /// and the looks before it) is within the budget.
    pub fn sampled(&mut self, now_ns: u64, thread_cpu_ns: u64) {
        let used = self
            .cpu_at_sample
            .map_or(0, |c| thread_cpu_ns.saturating_sub(c));
        self.cpu_at_sample = Some(thread_cpu_ns);
        (self.hold_until_ns, self.owed_ns) = match self.share {
            Some(share) if self.busy => {
                // A sample that cost more than the longest hold pays for leaves the rest
                // owed, to the holds after it.
                let hold = ((used as f64 / share) as u64).saturating_add(self.owed_ns);
                let held = hold.clamp(self.min_hold_ns, MAX_HOLD_NS);
                (now_ns + held, hold.saturating_sub(held))
            }
            _ => (0, 0),
        };
    }

    /// Whether the next sample may do its costly part (copy and check every value): not
    /// while yielding with a sample's cost still owed, so that the thread keeps to its
    /// budget when one such sample costs more than the longest hold pays for.
    pub fn costly_work_fits(&self) -> bool {
        !self.yielding() || self.owed_ns == 0
    }

    /// How long to wait before looking at the segment again, when yielding.
    pub fn hold_ns(&self, now_ns: u64) -> Option<u64> {
        if !self.yielding() {
            return None;
        }
        let left = self.hold_until_ns.saturating_sub(now_ns);
        (left > 0).then_some(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_cores_is_the_idle_share_of_every_core() {
        let a = CpuTimes {
            idle: 0,
            total: 0,
            cores: 2,
        };
        let b = CpuTimes {
            idle: 50,
            total: 200,
            cores: 2,
        };
        assert_eq!(spare_cores(a, b), Some(0.5));
        assert_eq!(spare_cores(b, b), None, "no time passed");
        assert_eq!(spare_cores(b, a), None, "counters went back");
    }

    fn reading(idle: u64, total: u64) -> Option<CpuTimes> {
        Some(CpuTimes {
            idle,
            total,
            cores: 2,
        })
    }

    #[test]
    fn a_busy_machine_holds_samples_apart_by_the_cpu_they_cost() {
        // 1 % of a core.
        let mut b = CpuBudget::new(Some(1.0), MIN_HOLD_NS);
        b.observe(0, reading(0, 0), None);
        assert!(!b.yielding(), "one reading says nothing yet");
        // 100 ticks of 2 cores, 5 idle: 0.1 core spare.
        b.observe(250_000_000, reading(5, 100), None);
        assert!(b.yielding());
        b.sampled(300_000_000, 1_000_000);
        // 400 µs of CPU since the last sample: 40 ms at 1 % of a core.
        b.sampled(300_000_000, 1_400_000);
        assert_eq!(b.hold_ns(300_000_000), Some(40_000_000));
        assert_eq!(b.hold_ns(330_000_000), Some(10_000_000));
        assert_eq!(b.hold_ns(340_000_000), None);
        // A cheap sample still holds the next one off for the shortest hold: wakeups cost
        // the run more than the thread's own CPU time shows.
        b.sampled(340_000_000, 1_410_000);
        assert_eq!(b.hold_ns(340_000_000), Some(MIN_HOLD_NS));
        // A hold never exceeds the maximum, however much a sample cost.
        b.sampled(400_000_000, 1_410_000 + 10_000_000);
        assert_eq!(b.hold_ns(400_000_000), Some(MAX_HOLD_NS));
        // A sample that cost more than the longest hold pays for leaves the rest owed: the
        // samples after it leave out their costly part until it is paid.
        let mut b = CpuBudget::new(Some(1.0), MIN_HOLD_NS);
        b.observe(0, reading(0, 0), None);
        b.observe(250_000_000, reading(5, 100), None);
        b.sampled(300_000_000, 1_000_000);
        assert!(b.costly_work_fits());
        // 1.5 ms of CPU: 150 ms at 1 % of a core.
        b.sampled(300_000_000, 2_500_000);
        assert_eq!(b.hold_ns(300_000_000), Some(MAX_HOLD_NS));
        assert!(!b.costly_work_fits(), "50 ms owed");
        // A cheap sample of 50 µs (5 ms) holds off for what is owed too.
        b.sampled(400_000_000, 2_550_000);
        assert_eq!(b.hold_ns(400_000_000), Some(55_000_000));
        assert!(b.costly_work_fits());
        // A reader that repaints ten times a second needs no more samples than that.
        let mut b = CpuBudget::new(Some(1.0), 100_000_000);
        b.observe(0, reading(0, 0), None);
        b.observe(250_000_000, reading(5, 100), None);
        b.sampled(300_000_000, 1_000_000);
        b.sampled(300_000_000, 1_400_000);
        assert_eq!(b.hold_ns(300_000_000), Some(100_000_000));
        assert_eq!(CpuBudget::new(Some(1.0), 0).min_hold_ns, MIN_HOLD_NS);
    }

    #[test]
    fn spare_cpu_ends_the_yielding_with_hysteresis() {
        let mut b = CpuBudget::new(Some(1.0), MIN_HOLD_NS);
        b.observe(0, reading(0, 0), None);
        b.observe(1, reading(10, 100), None); // 0.2 core spare: busy
        assert!(b.yielding());
        b.observe(2, reading(30, 200), None); // 0.4 spare: still busy
        assert!(b.yielding());
        b.sampled(3, 0);
        b.sampled(3, 100_000);
        assert!(b.hold_ns(3).is_some());
        // 0.6 spare: busy until it has lasted IDLE_READINGS readings in a row.
        b.observe(4, reading(60, 300), None);
        b.observe(5, reading(90, 400), None);
        b.observe(6, reading(100, 500), None); // 0.2 spare: starts over
        let mut idle = 100;
        for k in 0..IDLE_READINGS {
            assert!(b.yielding(), "after {k} readings with spare CPU");
            idle += 30;
            b.observe(
                7 + u64::from(k),
                reading(idle, 600 + 100 * u64::from(k)),
                None,
            );
        }
        assert!(!b.yielding());
        assert_eq!(
            b.hold_ns(20),
            None,
            "no hold once the machine has spare CPU"
        );
        b.observe(21, reading(idle + 15, 1000), None); // 0.3 spare: not busy yet
        assert!(!b.yielding());
    }

    #[test]
    fn an_observer_that_takes_more_than_the_machine_leaves_spare_yields() {
        let mut b = CpuBudget::new(Some(1.0), MIN_HOLD_NS);
        let ms = 1_000_000;
        b.observe(0, reading(0, 0), Some(0));
        // 0.6 core spare while the observer took 0.4: a quiet machine.
        b.observe(100 * ms, reading(30, 100), Some(40 * ms));
        assert!(!b.yielding());
        // 0.4 spare while it took 0.5: it competes with the run.
        b.observe(200 * ms, reading(50, 200), Some(90 * ms));
        assert!(b.yielding());
        // Yielding, it takes little; the machine's spare CPU decides as before.
        b.observe(300 * ms, reading(55, 300), Some(91 * ms));
        assert!(b.yielding());
        // A thread that takes a few percent on a machine with little spare is no
        // competitor (below a twentieth of a core).
        let mut b = CpuBudget::new(Some(1.0), MIN_HOLD_NS);
        b.observe(0, reading(0, 0), Some(0));
        b.observe(100 * ms, reading(15, 100), Some(4 * ms));
        assert!(!b.yielding(), "0.3 spare, 0.04 own");
    }

    #[test]
    fn without_a_budget_or_without_proc_stat_it_never_yields() {
        let mut b = CpuBudget::new(None, MIN_HOLD_NS);
        b.observe(0, reading(0, 0), None);
        b.observe(1, reading(0, 100), None);
        assert!(!b.yielding());
        b.sampled(2, 0);
        b.sampled(2, 1_000_000);
        assert_eq!(b.hold_ns(2), None);
        let mut b = CpuBudget::new(Some(0.0), MIN_HOLD_NS);
        b.observe(0, reading(0, 0), None);
        b.observe(1, reading(0, 100), None);
        assert!(!b.yielding(), "0 % is no budget, not no samples");
        let mut b = CpuBudget::new(Some(1.0), MIN_HOLD_NS);
        b.observe(0, reading(0, 0), None);
        b.observe(1, reading(0, 100), None);
        assert!(b.yielding());
        b.observe(2, None, None);
        assert!(!b.yielding());
        assert!(b.check_due(2 + CHECK_INTERVAL_NS));
        assert!(!b.check_due(3));
    }
}
