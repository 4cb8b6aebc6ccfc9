//! [`Accountant`]: every env's episodes from the frames taken, one frame at a time (pure:
//! the same code for the follower's frames and a recording's).

use serde_json::{Value, json};

use crate::rhythm::{FlagEnding, Flags};

/// How an episode ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ending {
    /// Its last frame's done flag is set (the env terminated; done wins over truncated).
    Done,
    /// Its last frame's truncated flag is set (a time limit).
    Truncated,
    /// The trainer asked for a reset after its last frame (the env's reset flag, seen in
    /// the copy of that frame, with done and truncated clear).
    Reset,
    /// It held a non-finite value (a reward, or an observation or action the check
    /// covered) and then ended by one of the above.
    NonFinite,
    /// No ending yet: the env is still in it, or the run, the file or the attachment ended
    /// first.
    Running,
}

impl Ending {
    pub const ALL: [Self; 5] = [
        Self::Done,
        Self::Truncated,
        Self::Reset,
        Self::NonFinite,
        Self::Running,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Done => "done",
            Self::Truncated => "truncated",
            Self::Reset => "reset",
            Self::NonFinite => "nonfinite",
            Self::Running => "running",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// Its place in [`Ending::ALL`].
    pub fn position(self) -> usize {
        self as usize
    }

    /// It ended (by anything but the end of what was followed).
    pub fn finished(self) -> bool {
        self != Self::Running
    }
}

/// One episode of one env.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Episode {
    pub env: u32,
    /// Its first frame (`frame_seq`): the frame after its env's previous ending, or the
    /// first frame followed.
    pub first_frame: u64,
    pub last_frame: u64,
    /// The times of its first and last frames taken (the follower's clock, CLOCK_MONOTONIC).
    pub first_ns: u64,
    pub last_ns: u64,
    /// The sum of its rewards over the frames taken (NaN or infinite once one is).
    pub ret: f64,
    /// Its smallest and largest finite rewards (NaN when it had none).
    pub min_reward: f32,
    pub max_reward: f32,
    pub ending: Ending,
    /// Frames of it that were not taken (missed, torn, skipped): its return lacks theirs,
    /// and an ending among them is not seen (two episodes then count as one).
    pub lacking: u64,
    /// It began before the first frame followed: frames before it are not known.
    pub began_before: bool,
    /// The first frame that held a non-finite value of this env.
    pub nonfinite_frame: Option<u64>,
}

impl Episode {
    /// Frames from its first to its last, taken or not.
    pub fn length(&self) -> u64 {
        self.last_frame.saturating_sub(self.first_frame) + 1
    }

    /// Every frame of it was taken and its start seen: its return and length are exact.
    pub fn complete(&self) -> bool {
        self.lacking == 0 && !self.began_before
    }

    /// A return that figures may use: of a complete episode, and finite.
    pub fn exact_return(&self) -> Option<f64> {
        (self.complete() && self.ret.is_finite()).then_some(self.ret)
    }

    /// The return as shown: `≥`-free when exact, with the frames it lacks otherwise.
    pub fn return_text(&self) -> String {
        let v = crate::detect::format_value(self.ret);
        if self.complete() {
            v
        } else if self.began_before {
            format!("{v} (began before)")
        } else {
            format!(
                "{v} ({} frames lacking)",
                crate::text::thousands(self.lacking)
            )
        }
    }

    /// The episode as one JSON object (`episodes --json`, a recording's episodes).
    pub fn to_json(&self) -> Value {
        let num = |v: f64| {
            if v.is_finite() {
                json!(v)
            } else {
                json!(crate::detect::format_value(v))
            }
        };
        json!({
            "env": self.env,
            "first_frame": self.first_frame,
            "last_frame": self.last_frame,
            "first_ns": self.first_ns,
            "last_ns": self.last_ns,
            "length": self.length(),
            "return": num(self.ret),
            "min_reward": num(f64::from(self.min_reward)),
            "max_reward": num(f64::from(self.max_reward)),
            "ending": self.ending.as_str(),
            "complete": self.complete(),
            "lacking_frames": self.lacking,
            "began_before": self.began_before,
            "nonfinite_frame": self.nonfinite_frame,
        })
    }
}

/// One frame as the accountant reads it.
#[derive(Clone, Copy, Debug)]
pub struct FrameView<'a> {
    pub frame_seq: u64,
    /// When it was taken (the follower's clock).
    pub time_ns: u64,
    /// Every env's, in env order (a shorter array leaves the rest at 0).
    pub rewards: &'a [f32],
    pub dones: &'a [u8],
    pub truncateds: Option<&'a [u8]>,
    pub resets: &'a [u8],
}

/// The open episode of one env, but for its running sums (the accountant's hot arrays)
/// and what every open episode shares (its last frame, the frames lacking since).
#[derive(Clone, Copy, Debug)]
struct Open {
    first_frame: u64,
    first_ns: u64,
    /// [`Accountant::frames_lacking`] when it began: the frames lacking since are its own.
    lacking_from: u64,
    began_before: bool,
    nonfinite: Option<u64>,
    /// A frame of it was taken (else it holds only the frame it is due to start at).
    taken: bool,
}

impl Open {
    fn new(first_frame: u64, began_before: bool, lacking_from: u64) -> Self {
        Self {
            first_frame,
            first_ns: 0,
            lacking_from,
            began_before,
            nonfinite: None,
            taken: false,
        }
    }
}

/// The running sums of every env's open episode, an array each: a frame adds its rewards
/// to them in one pass that vectorises.
#[derive(Clone, Debug)]
struct Sums {
    ret: Vec<f64>,
    /// The smallest and largest finite rewards: +inf and -inf while there is none (no
    /// finite reward is either), so that plain comparisons keep them, which vectorise
    /// where `f32::min` and `max` (NaN treated apart) do not.
    min: Vec<f32>,
    max: Vec<f32>,
}

impl Sums {
    fn new(num_envs: usize) -> Self {
        Self {
            ret: vec![0.0; num_envs],
            min: vec![f32::INFINITY; num_envs],
            max: vec![f32::NEG_INFINITY; num_envs],
        }
    }

    fn restart(&mut self, env: usize) {
        if let (Some(r), Some(lo), Some(hi)) = (
            self.ret.get_mut(env),
            self.min.get_mut(env),
            self.max.get_mut(env),
        ) {
            (*r, *lo, *hi) = (0.0, f32::INFINITY, f32::NEG_INFINITY);
        }
    }

    /// Adds every env's reward (an env past `rewards`' end gets 0).
    fn add(&mut self, rewards: &[f32]) {
        let n = rewards.len().min(self.ret.len());
        for (lo, hi) in self.min[n..].iter_mut().zip(&mut self.max[n..]) {
            *lo = lo.min(0.0);
            *hi = hi.max(0.0);
        }
        let rows = self.ret[..n]
            .iter_mut()
            .zip(&mut self.min[..n])
            .zip(&mut self.max[..n])
            .zip(&rewards[..n]);
        for (((ret, lo), hi), &r) in rows {
            *ret += f64::from(r);
            // A non-finite reward changes neither.
            let finite = r.is_finite();
            let low = if finite { r } else { f32::INFINITY };
            let high = if finite { r } else { f32::NEG_INFINITY };
            *lo = if low < *lo { low } else { *lo };
            *hi = if high > *hi { high } else { *hi };
        }
    }

    /// Env `env`'s smallest and largest finite rewards (NaN when it had none).
    fn range(&self, env: usize) -> (f32, f32) {
        let none_as_nan =
            |v: Option<&f32>| v.copied().filter(|v| v.is_finite()).unwrap_or(f32::NAN);
        (
            none_as_nan(self.min.get(env)),
            none_as_nan(self.max.get(env)),
        )
    }
}

/// Every env's episodes, from the frames taken in order.
#[derive(Clone, Debug)]
pub struct Accountant {
    open: Vec<Open>,
    sums: Sums,
    /// The envs whose open episode has no frame taken yet, ascending.
    untaken: Vec<u32>,
    /// The newest frame taken (or the frame followed from), and when it was taken.
    last_frame: u64,
    last_ns: u64,
    frames_taken: u64,
    /// Frames not taken between frames taken, since the start.
    frames_lacking: u64,
}

impl Accountant {
    /// Follows `num_envs` envs from the frame after `after_frame` (the frame the segment
    /// showed at the attach; 0: before the run's first frame, so that its first episodes
    /// are whole).
    pub fn new(num_envs: u32, after_frame: u64) -> Self {
        Self {
            open: vec![Open::new(after_frame + 1, after_frame > 0, 0); num_envs as usize],
            sums: Sums::new(num_envs as usize),
            untaken: (0..num_envs).collect(),
            last_frame: after_frame,
            last_ns: 0,
            frames_taken: 0,
            frames_lacking: 0,
        }
    }

    pub fn num_envs(&self) -> u32 {
        self.open.len() as u32
    }

    /// The newest frame taken.
    pub fn last_frame(&self) -> u64 {
        self.last_frame
    }

    /// Frames taken, and frames not taken between them.
    pub fn frames(&self) -> (u64, u64) {
        (self.frames_taken, self.frames_lacking)
    }

    /// Takes frame `f`; episodes that end at it go to `out`. `nonfinite` names envs with a
    /// non-finite observation or action in this frame (their rewards are looked at here).
    /// A frame not after the last one taken starts the count again (a new run in the
    /// segment: the open episodes go to `out` as running).
    pub fn frame(
        &mut self,
        f: &FrameView<'_>,
        nonfinite: impl IntoIterator<Item = u32>,
        out: &mut Vec<Episode>,
    ) {
        if f.frame_seq <= self.last_frame {
            if f.frame_seq == self.last_frame {
                // The same frame again (or the one shown at the attach): nothing new.
                return;
            }
            let n = self.num_envs();
            self.finish(out);
            let after = f.frame_seq.saturating_sub(1);
            *self = Self::new(n, after);
        }
        let gap = f.frame_seq - self.last_frame - 1;
        self.last_frame = f.frame_seq;
        self.last_ns = f.time_ns;
        self.frames_taken += 1;
        self.frames_lacking += gap;
        for e in self.untaken.drain(..) {
            if let Some(o) = self.open.get_mut(e as usize) {
                o.first_ns = f.time_ns;
                o.taken = true;
            }
        }
        for env in nonfinite {
            if let Some(o) = self.open.get_mut(env as usize) {
                o.nonfinite.get_or_insert(f.frame_seq);
            }
        }
        self.sums.add(f.rewards);
        if !lrbc_platform::vector::all_finite(f.rewards) {
            for (o, r) in self.open.iter_mut().zip(f.rewards) {
                if !r.is_finite() {
                    o.nonfinite.get_or_insert(f.frame_seq);
                }
            }
        }
        let flags = Flags {
            dones: f.dones,
            truncateds: f.truncateds,
            resets: f.resets,
        };
        for (e, ending) in flags.endings(self.open.len()) {
            let ending = match ending {
                FlagEnding::Done => Ending::Done,
                FlagEnding::Truncated => Ending::Truncated,
                FlagEnding::Reset => Ending::Reset,
            };
            out.push(self.close(e, ending));
            if let Some(o) = self.open.get_mut(e) {
                *o = Open::new(f.frame_seq + 1, false, self.frames_lacking);
            }
            self.sums.restart(e);
            self.untaken.push(e as u32);
        }
    }

    /// The episodes going on, as of the last frame taken (ending `Running`), in env
    /// order; an env with no frame of its current episode taken yet has none.
    pub fn running(&self) -> impl Iterator<Item = Episode> + '_ {
        (0..self.open.len())
            .filter(|&e| self.open[e].taken)
            .map(|e| self.close(e, Ending::Running))
    }

    /// The frame each env's current episode began at (its previous ending + 1, or the
    /// first frame followed), and whether that is before the first frame followed.
    pub fn started(&self, env: u32) -> Option<(u64, bool)> {
        self.open
            .get(env as usize)
            .map(|o| (o.first_frame, o.began_before))
    }

    /// The end of what is followed: every episode going on goes to `out` as running.
    pub fn finish(&mut self, out: &mut Vec<Episode>) {
        out.extend(self.running());
        let n = self.open.len();
        for o in &mut self.open {
            *o = Open::new(self.last_frame + 1, true, self.frames_lacking);
        }
        self.sums = Sums::new(n);
        self.untaken = (0..n as u32).collect();
    }

    /// Env `env`'s open episode as it stands, ending `ending`.
    fn close(&self, env: usize, ending: Ending) -> Episode {
        let o = self.open.get(env).copied().unwrap_or(Open::new(0, true, 0));
        let ending = if o.nonfinite.is_some() && ending.finished() {
            Ending::NonFinite
        } else {
            ending
        };
        let (min_reward, max_reward) = self.sums.range(env);
        Episode {
            env: env as u32,
            first_frame: o.first_frame,
            last_frame: self.last_frame,
            first_ns: o.first_ns,
            last_ns: self.last_ns,
            ret: self.sums.ret.get(env).copied().unwrap_or(0.0),
            min_reward,
            max_reward,
            ending,
            lacking: self.frames_lacking - o.lacking_from,
            began_before: o.began_before,
            nonfinite_frame: o.nonfinite,
        }
    }
}
