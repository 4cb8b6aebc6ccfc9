//! Two runs' episodes and events side by side: per env and for the whole run, the
//! episodes finished, the mean return, the mean length and the share of each ending in A
//! and in B, B's difference from A with its 95 % interval, and whether B's mean return is
//! higher, lower or not distinguishable from A's.
//!
//! The intervals (`lrbc_live::stats`): Welch's t for the means, Newcombe's hybrid score
//! for the shares, a Poisson count for the episodes finished. Each episode counts as one
//! independent value. An episode counts when it ended within the frames both runs hold
//! (from each run's start to the last place both reached); its return and length count
//! when they are exact (every frame of it recorded, its start seen) and finite. Nothing
//! is kept per episode: a run's tallies are a few numbers per env.

use lrbc_live::detect::{Event, EventKind};
use lrbc_live::episodes::{Ending, Episode};
use lrbc_live::stats::{self, Interval, Moments};

/// The endings an episode finished with, in [`Ending::ALL`]'s order (not `running`).
pub const FINISHED_ENDINGS: [Ending; 4] = [
    Ending::Done,
    Ending::Truncated,
    Ending::Reset,
    Ending::NonFinite,
];

/// One run's finished episodes, of one env or of all.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EpisodeTally {
    /// Episodes that ended (by any ending but `running`).
    pub finished: u64,
    /// The exact, finite returns.
    pub returns: Moments,
    /// The lengths, in frames, of the episodes with an exact return.
    pub lengths: Moments,
    /// Finished episodes by ending, in [`FINISHED_ENDINGS`]' order.
    pub endings: [u64; 4],
}

impl EpisodeTally {
    /// Counts episode `e` if it finished.
    pub fn add(&mut self, e: &Episode) {
        let Some(k) = FINISHED_ENDINGS.iter().position(|x| *x == e.ending) else {
            return;
        };
        self.finished += 1;
        self.endings[k] += 1;
        if let Some(r) = e.exact_return() {
            self.returns.push(r);
            self.lengths.push(e.length() as f64);
        }
    }

    pub fn merge(&mut self, other: &Self) {
        self.finished += other.finished;
        self.returns.merge(&other.returns);
        self.lengths.merge(&other.lengths);
        for (x, y) in self.endings.iter_mut().zip(other.endings) {
            *x += y;
        }
    }

    /// The episodes that ended with `ending`.
    pub fn of(&self, ending: Ending) -> u64 {
        FINISHED_ENDINGS
            .iter()
            .position(|x| *x == ending)
            .map_or(0, |k| self.endings[k])
    }

    /// The share of the finished episodes that ended with `ending`.
    pub fn share(&self, ending: Ending) -> Option<f64> {
        (self.finished > 0).then(|| self.of(ending) as f64 / self.finished as f64)
    }
}

/// Whether B's mean return is above A's: the 95 % interval of the difference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReturnVerdict {
    /// The interval lies above 0.
    Higher,
    /// Below 0.
    Lower,
    /// It holds 0.
    NotDistinguishable,
    /// A run has fewer than two exact returns: no interval.
    TooFew,
}

impl ReturnVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Higher => "higher",
            Self::Lower => "lower",
            Self::NotDistinguishable => "not distinguishable",
            Self::TooFew => "too few episodes",
        }
    }
}

/// A's tally and B's, with B's differences from A.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TalliesSideBySide {
    pub a: EpisodeTally,
    pub b: EpisodeTally,
}

impl TalliesSideBySide {
    pub fn finished(&self) -> Interval {
        stats::count_difference(self.a.finished, self.b.finished)
    }

    pub fn mean_return(&self) -> Option<Interval> {
        stats::mean_difference(&self.a.returns, &self.b.returns)
    }

    pub fn mean_length(&self) -> Option<Interval> {
        stats::mean_difference(&self.a.lengths, &self.b.lengths)
    }

    pub fn share(&self, ending: Ending) -> Option<Interval> {
        stats::share_difference(
            self.a.of(ending),
            self.a.finished,
            self.b.of(ending),
            self.b.finished,
        )
    }

    pub fn verdict(&self) -> ReturnVerdict {
        match self.mean_return().map(|i| i.sign()) {
            None => ReturnVerdict::TooFew,
            Some(Some(true)) => ReturnVerdict::Higher,
            Some(Some(false)) => ReturnVerdict::Lower,
            Some(None) => ReturnVerdict::NotDistinguishable,
        }
    }
}

/// Both runs' episodes, per env and for the whole run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EpisodesCompared {
    /// Env `k`'s at `k`, for every env either run has.
    pub envs: Vec<TalliesSideBySide>,
    pub run: TalliesSideBySide,
}

/// Which of the two runs: A, the baseline, or B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ComparedRun {
    A,
    B,
}

impl ComparedRun {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::A => "A",
            Self::B => "B",
        }
    }
}

impl EpisodesCompared {
    /// Counts the episodes of `run` that ended at a frame both runs hold.
    pub fn ended(&mut self, run: ComparedRun, episodes: &[Episode]) {
        for e in episodes {
            let env = e.env as usize;
            if self.envs.len() <= env {
                self.envs.resize(env + 1, TalliesSideBySide::default());
            }
            let (per_env, whole) = match run {
                ComparedRun::A => (&mut self.envs[env].a, &mut self.run.a),
                ComparedRun::B => (&mut self.envs[env].b, &mut self.run.b),
            };
            per_env.add(e);
            whole.add(e);
        }
    }

    /// The envs where B's mean return compares with A's as `verdict` says.
    pub fn envs_where(&self, verdict: ReturnVerdict) -> usize {
        self.envs.iter().filter(|t| t.verdict() == verdict).count()
    }

    /// Each run's number of envs, so that an env without a finished episode has its row.
    pub fn envs_at_least(&mut self, n: usize) {
        if self.envs.len() < n {
            self.envs.resize(n, TalliesSideBySide::default());
        }
    }
}

/// Both runs' events by kind, in [`EventKind::ALL`]'s order: those each run's recorder
/// wrote, first seen within the frames both runs hold.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventsCompared {
    pub a: [u64; EventKind::ALL.len()],
    pub b: [u64; EventKind::ALL.len()],
    /// The run's recording holds its events (a recording written without its recorder's
    /// detector holds none: `events FILE` finds them again).
    pub recorded_a: bool,
    pub recorded_b: bool,
}

impl EventsCompared {
    /// Counts `events` of `run` first seen from `first_seq` to `last_seq`.
    pub fn count(&mut self, run: ComparedRun, events: &[Event], first_seq: u64, last_seq: u64) {
        let counts = match run {
            ComparedRun::A => &mut self.a,
            ComparedRun::B => &mut self.b,
        };
        for e in events {
            if (first_seq..=last_seq).contains(&e.first_frame) {
                counts[e.kind.position()] += 1;
            }
        }
    }

    /// The kinds seen in either run, with A's count and B's.
    pub fn kinds(&self) -> impl Iterator<Item = (EventKind, u64, u64)> + '_ {
        EventKind::ALL
            .into_iter()
            .enumerate()
            .map(|(k, kind)| (kind, self.a[k], self.b[k]))
            .filter(|(_, a, b)| a + b > 0)
    }
}
