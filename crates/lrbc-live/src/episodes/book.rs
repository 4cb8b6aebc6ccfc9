//! [`EpisodeBook`]: what is kept of a run's episodes: every env's totals and the run's
//! always, the recent episodes in full within a bound, the mean return and length per
//! time bin over the whole run, and each env's episode going on.

use std::collections::VecDeque;

use super::accountant::{Accountant, Ending, Episode};

/// Time bins kept over a run: past this many, neighbours merge (each bin twice as long).
pub const MAX_BINS: usize = 240;
/// The first width of a time bin.
pub const FIRST_BIN_NS: u64 = 1_000_000_000;
/// Recent episodes kept when nothing else is set.
pub const DEFAULT_EPISODES_KEPT: usize = 50_000;

/// What an [`EpisodeBook`] keeps beside the run's totals and frame counts, which it
/// always keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BookDetail {
    /// Nothing more: what a line of figures prints (`watch`). Each episode that ends
    /// costs a few additions, and the episodes going on are not gathered.
    Totals,
    /// Every env's totals and episode going on, the time bins, and at most this many
    /// recent episodes in full.
    Full { recent: usize },
}

impl Default for BookDetail {
    /// Everything, with [`DEFAULT_EPISODES_KEPT`] recent episodes in full.
    fn default() -> Self {
        Self::Full {
            recent: DEFAULT_EPISODES_KEPT,
        }
    }
}

/// What is kept of one env's episodes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct EnvTotals {
    /// Episodes that ended.
    pub finished: u64,
    /// Of those, complete with a finite return: the ones its means are over.
    pub exact: u64,
    pub sum_return: f64,
    pub sum_length: u64,
    pub truncated: u64,
    pub nonfinite: u64,
    /// Its last episode that ended.
    pub last: Option<Episode>,
}

impl EnvTotals {
    pub fn mean_return(&self) -> Option<f64> {
        (self.exact > 0).then(|| self.sum_return / self.exact as f64)
    }

    pub fn mean_length(&self) -> Option<f64> {
        (self.exact > 0).then(|| self.sum_length as f64 / self.exact as f64)
    }

    /// Share of its finished episodes that were truncated.
    pub fn truncated_share(&self) -> Option<f64> {
        (self.finished > 0).then(|| self.truncated as f64 / self.finished as f64)
    }
}

/// The episodes that ended in one span of time (by their last frame's time).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Bin {
    pub start_ns: u64,
    /// Episodes that ended in it, of every ending.
    pub ended: u64,
    /// Of those, complete with a finite return.
    pub exact: u64,
    pub sum_return: f64,
    pub sum_length: u64,
}

impl Bin {
    pub fn mean_return(&self) -> Option<f64> {
        (self.exact > 0).then(|| self.sum_return / self.exact as f64)
    }

    pub fn mean_length(&self) -> Option<f64> {
        (self.exact > 0).then(|| self.sum_length as f64 / self.exact as f64)
    }
}

/// The run's totals.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RunTotals {
    /// Episodes by ending ([`Ending::ALL`]'s order); `Running`: those cut by the end of
    /// what was followed (a re-attachment, the end of a file).
    pub by_ending: [u64; 5],
    /// Complete episodes that ended, and of those with a finite return.
    pub complete: u64,
    pub exact: u64,
    /// Episodes that ended and lack frames or began before the first frame followed.
    pub incomplete: u64,
    pub sum_return: f64,
    pub sum_length: u64,
    /// Frames taken, and frames between them that were not.
    pub frames_taken: u64,
    pub frames_lacking: u64,
}

impl RunTotals {
    pub fn finished(&self) -> u64 {
        self.by_ending[..4].iter().sum()
    }

    pub fn mean_return(&self) -> Option<f64> {
        (self.exact > 0).then(|| self.sum_return / self.exact as f64)
    }

    pub fn mean_length(&self) -> Option<f64> {
        (self.exact > 0).then(|| self.sum_length as f64 / self.exact as f64)
    }
}

/// A run's episodes, as a consumer keeps them.
#[derive(Clone, Debug)]
pub struct EpisodeBook {
    pub num_envs: u32,
    pub envs: Vec<EnvTotals>,
    /// Each env's episode going on (as of [`EpisodeBook::last_frame`]); None: none of its
    /// frames taken yet.
    pub running: Vec<Option<Episode>>,
    /// The episodes that ended, newest last, at most `kept`.
    recent: VecDeque<Episode>,
    kept: usize,
    /// False: the run's totals and frame counts alone ([`BookDetail::Totals`]); `envs`,
    /// `running`, `recent` and the bins stay empty.
    detailed: bool,
    /// Episodes dropped from `recent` (every total still counts them).
    pub dropped: u64,
    pub totals: RunTotals,
    bins: Vec<Bin>,
    bin_ns: u64,
    /// The time of the first frame taken.
    pub t0_ns: Option<u64>,
    /// The newest frame taken.
    pub last_frame: u64,
    /// The time of the newest frame taken.
    pub last_ns: u64,
    /// Moves with every change (readers redraw when it does).
    pub version: u64,
    /// What the reader should know beside the figures (a recording's episodes being
    /// counted, why they could not be).
    pub note: Option<String>,
}

impl Default for EpisodeBook {
    fn default() -> Self {
        Self::new(0, DEFAULT_EPISODES_KEPT)
    }
}

impl EpisodeBook {
    /// A book that keeps everything, with at most `kept` recent episodes in full.
    pub fn new(num_envs: u32, kept: usize) -> Self {
        Self::with_detail(num_envs, BookDetail::Full { recent: kept })
    }

    /// A book that keeps what `detail` says.
    pub fn with_detail(num_envs: u32, detail: BookDetail) -> Self {
        let (kept, detailed) = match detail {
            BookDetail::Totals => (1, false),
            BookDetail::Full { recent } => (recent.max(1), true),
        };
        let per_env = if detailed { num_envs as usize } else { 0 };
        Self {
            num_envs,
            envs: vec![EnvTotals::default(); per_env],
            running: vec![None; per_env],
            recent: VecDeque::new(),
            kept,
            detailed,
            dropped: 0,
            totals: RunTotals::default(),
            bins: Vec::new(),
            bin_ns: FIRST_BIN_NS,
            t0_ns: None,
            last_frame: 0,
            last_ns: 0,
            version: 0,
            note: None,
        }
    }

    /// Episodes kept in full for `bytes` of memory.
    pub fn kept_for_bytes(bytes: usize) -> usize {
        (bytes / size_of::<Episode>()).max(1)
    }

    /// Bytes its allocations hold (for the memory budget).
    pub fn heap_bytes(&self) -> usize {
        use crate::memory::{heap, vec_bytes};
        vec_bytes(&self.envs)
            + vec_bytes(&self.running)
            + heap(self.recent.capacity() * size_of::<Episode>())
            + vec_bytes(&self.bins)
    }

    /// An episode that ended (or was cut: `Running`).
    pub fn apply(&mut self, e: &Episode) {
        self.version += 1;
        let t = &mut self.totals;
        if let Some(n) = t.by_ending.get_mut(e.ending.position()) {
            *n += 1;
        }
        if !e.ending.finished() {
            return;
        }
        let exact = e.exact_return();
        if e.complete() {
            t.complete += 1;
        } else {
            t.incomplete += 1;
        }
        if let Some(r) = exact {
            t.exact += 1;
            t.sum_return += r;
            t.sum_length += e.length();
        }
        if !self.detailed {
            return;
        }
        if let Some(env) = self.envs.get_mut(e.env as usize) {
            env.finished += 1;
            match e.ending {
                Ending::Truncated => env.truncated += 1,
                Ending::NonFinite => env.nonfinite += 1,
                _ => {}
            }
            if let Some(r) = exact {
                env.exact += 1;
                env.sum_return += r;
                env.sum_length += e.length();
            }
            env.last = Some(*e);
        }
        self.bin(e, exact);
        self.recent.push_back(*e);
        if self.recent.len() > self.kept {
            self.recent.pop_front();
            self.dropped += 1;
        }
    }

    fn bin(&mut self, e: &Episode, exact: Option<f64>) {
        let t0 = *self.t0_ns.get_or_insert(e.last_ns);
        let at = e.last_ns.saturating_sub(t0);
        let mut k = (at / self.bin_ns) as usize;
        while k >= MAX_BINS {
            // Neighbours merge: each bin twice as long.
            let merged: Vec<Bin> = self
                .bins
                .chunks(2)
                .map(|pair| {
                    let mut b = pair[0];
                    for x in &pair[1..] {
                        b.ended += x.ended;
                        b.exact += x.exact;
                        b.sum_return += x.sum_return;
                        b.sum_length += x.sum_length;
                    }
                    b
                })
                .collect();
            self.bins = merged;
            self.bin_ns *= 2;
            k = (at / self.bin_ns) as usize;
        }
        while self.bins.len() <= k {
            let start_ns = t0 + self.bins.len() as u64 * self.bin_ns;
            self.bins.push(Bin {
                start_ns,
                ..Bin::default()
            });
        }
        if let Some(b) = self.bins.get_mut(k) {
            b.ended += 1;
            if let Some(r) = exact {
                b.exact += 1;
                b.sum_return += r;
                b.sum_length += e.length();
            }
        }
    }

    /// Takes the accountant's episodes going on and its frame counts.
    pub fn progress(&mut self, a: &Accountant, last_ns: u64) {
        if self.detailed {
            if self.running.len() != a.num_envs() as usize {
                self.running = vec![None; a.num_envs() as usize];
            }
            self.running.fill(None);
            for e in a.running() {
                if let Some(slot) = self.running.get_mut(e.env as usize) {
                    *slot = Some(e);
                }
            }
        }
        let (taken, lacking) = a.frames();
        self.totals.frames_taken = taken;
        self.totals.frames_lacking = lacking;
        self.last_frame = a.last_frame();
        self.last_ns = last_ns;
        self.t0_ns.get_or_insert(last_ns);
        self.version += 1;
    }

    /// The episodes that ended, newest last (at most `kept`).
    pub fn recent(&self) -> &VecDeque<Episode> {
        &self.recent
    }

    /// The episodes that ended after the first `seen` of the run (a reader's cursor:
    /// [`RunTotals::finished`] when it last read), and how many of those are no longer
    /// kept.
    pub fn ended_since(&self, seen: u64) -> (Vec<Episode>, u64) {
        let new = self.totals.finished().saturating_sub(seen);
        let kept = (self.recent.len() as u64).min(new);
        let skip = self.recent.len() - kept as usize;
        (self.recent.iter().skip(skip).copied().collect(), new - kept)
    }

    /// The mean return and length per time bin, and the bins' width.
    pub fn bins(&self) -> (&[Bin], u64) {
        (&self.bins, self.bin_ns)
    }

    /// Frames since `env`'s last ending (or since its first frame taken).
    pub fn frames_since_ending(&self, env: u32) -> Option<u64> {
        let r = self.running.get(env as usize).copied().flatten()?;
        Some(self.last_frame.saturating_sub(r.first_frame) + 1)
    }

    /// The median length of the last `n` complete episodes that ended.
    pub fn median_length(&self, n: usize) -> Option<f64> {
        let v: Vec<f64> = self
            .recent
            .iter()
            .rev()
            .filter(|e| e.complete())
            .take(n)
            .map(|e| e.length() as f64)
            .collect();
        crate::stats::median(v)
    }

    /// The fences beyond which a return of the last `n` exact ones is an outlier: Tukey's
    /// far-out fences, three interquartile ranges beyond the quartiles.
    pub fn return_fences(&self, n: usize) -> Option<(f64, f64)> {
        let mut v: Vec<f64> = self
            .recent
            .iter()
            .rev()
            .filter_map(Episode::exact_return)
            .take(n)
            .collect();
        if v.len() < 8 {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let q1 = crate::stats::quantile(&v, 0.25)?;
        let q3 = crate::stats::quantile(&v, 0.75)?;
        let iqr = q3 - q1;
        Some((q1 - 3.0 * iqr, q3 + 3.0 * iqr))
    }

    /// Of the last `n` episodes that ended, those with an exact return beyond the fences,
    /// newest first.
    pub fn outlier_returns(&self, n: usize) -> Vec<Episode> {
        let Some((lo, hi)) = self.return_fences(n) else {
            return Vec::new();
        };
        self.recent
            .iter()
            .rev()
            .take(n)
            .filter(|e| e.exact_return().is_some_and(|r| r < lo || r > hi))
            .copied()
            .collect()
    }

    /// Envs whose episode going on has run more than `k` times the median length (of the
    /// last `n` complete episodes) without an ending, the longest first: (env, frames).
    pub fn stuck_envs(&self, k: f64, n: usize) -> Vec<(u32, u64)> {
        let Some(median) = self.median_length(n) else {
            return Vec::new();
        };
        let mut v: Vec<(u32, u64)> = (0..self.num_envs)
            .filter_map(|env| Some((env, self.frames_since_ending(env)?)))
            .filter(|&(_, frames)| frames as f64 > k * median)
            .collect();
        v.sort_by_key(|&(env, frames)| (std::cmp::Reverse(frames), env));
        v
    }
}
