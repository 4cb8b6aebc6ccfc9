//! [`EndingsInStep`]: the frame each env's episode began at, and a frame's endings told
//! apart: terminations (done), truncations and whether the truncated envs all reached
//! one episode length (envs in step meeting the time limit), and resets by the trainer.

/// A frame's done, truncated and reset flags, one per env.
#[derive(Clone, Copy, Debug)]
pub struct Flags<'a> {
    pub dones: &'a [u8],
    /// None when the layout has none.
    pub truncateds: Option<&'a [u8]>,
    pub resets: &'a [u8],
}

/// How an env's episode ended in a frame, by its flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagEnding {
    /// Done is set (done wins over truncated).
    Done,
    /// Truncated is set, done clear.
    Truncated,
    /// Reset is set, done and truncated clear.
    Reset,
}

impl Flags<'_> {
    /// The envs of the first `num_envs` with a flag set, ascending, and how each ended
    /// (an array shorter than `num_envs` leaves the rest clear). Envs with no flag set
    /// (nearly all, most frames) are passed over a block at a time.
    pub fn endings(&self, num_envs: usize) -> impl Iterator<Item = (usize, FlagEnding)> + '_ {
        const BLOCK: usize = 32;
        let quiet = |a: &[u8], start: usize| {
            let end = (start + BLOCK).min(a.len());
            a[start.min(end)..end].iter().fold(0u8, |x, &v| x | v) == 0
        };
        let flag = |a: &[u8], e: usize| a.get(e).is_some_and(|&v| v != 0);
        (0..num_envs)
            .step_by(BLOCK)
            .filter(move |&start| {
                !(quiet(self.dones, start)
                    && self.truncateds.is_none_or(|t| quiet(t, start))
                    && quiet(self.resets, start))
            })
            .flat_map(move |start| start..(start + BLOCK).min(num_envs))
            .filter_map(move |e| {
                let ending = if flag(self.dones, e) {
                    FlagEnding::Done
                } else if self.truncateds.is_some_and(|t| flag(t, e)) {
                    FlagEnding::Truncated
                } else if flag(self.resets, e) {
                    FlagEnding::Reset
                } else {
                    return None;
                };
                Some((e, ending))
            })
    }
}

/// What ended in one frame.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FrameEndings {
    pub num_envs: u32,
    /// Envs whose done flag is set (done wins over truncated).
    pub terminated: u32,
    /// Envs whose truncated flag is set, done clear.
    pub truncated: u32,
    /// The episode length every truncated env reached, when they all reached the same
    /// one (None: none truncated, or their lengths differ).
    pub truncated_length: Option<u64>,
    /// Of the truncated envs, those whose episode began before the first frame followed:
    /// their lengths count from that frame.
    pub lengths_from_attach: u32,
    /// Envs whose reset flag is set with done and truncated clear (the trainer ended
    /// them).
    pub resets: u32,
}

impl FrameEndings {
    /// More than `share` of the envs truncated at one episode length: the time limit of
    /// envs in step.
    pub fn time_limit(&self, share: f64) -> bool {
        self.truncated_length.is_some() && self.above(self.truncated, share)
    }

    /// More than `share` of the envs reset by the trainer at once.
    pub fn resets_in_step(&self, share: f64) -> bool {
        self.above(self.resets, share)
    }

    /// The envs of a done burst: the terminated ones, and the truncated ones unless they
    /// are envs in step meeting the time limit.
    pub fn burst_envs(&self) -> u32 {
        self.terminated
            + if self.truncated_length.is_some() {
                0
            } else {
                self.truncated
            }
    }

    /// `n` envs are more than `share` of them.
    pub fn above(&self, n: u32, share: f64) -> bool {
        self.num_envs > 0 && f64::from(n) / f64::from(self.num_envs) > share
    }
}

/// Every env's episode start, from the frames taken in order.
#[derive(Clone, Debug, Default)]
pub struct EndingsInStep {
    /// The frame each env's episode began at.
    starts: Vec<u64>,
    /// Whether it began before the first frame followed.
    from_attach: Vec<bool>,
    last_frame: Option<u64>,
}

impl EndingsInStep {
    pub fn new() -> Self {
        Self::default()
    }

    /// Frame `frame_seq` with `flags`: what ended in it.
    pub fn frame(&mut self, frame_seq: u64, flags: Flags<'_>) -> FrameEndings {
        let n = flags.dones.len();
        let mut out = FrameEndings {
            num_envs: u32::try_from(n).unwrap_or(u32::MAX),
            ..FrameEndings::default()
        };
        if self.last_frame.is_none_or(|l| frame_seq < l) || self.starts.len() != n {
            // The first frame, a new run or a new segment: the episodes going on are
            // counted from the next frame (as the episodes' accountant counts them), and
            // began before it unless this is the run's frame 0. What ended in this frame
            // ended episodes not followed.
            self.starts = vec![frame_seq + 1; n];
            self.from_attach = vec![frame_seq > 0; n];
            self.last_frame = Some(frame_seq);
            return out;
        }
        if self.last_frame == Some(frame_seq) {
            return out;
        }
        self.last_frame = Some(frame_seq);
        let any = |a: &[u8]| a.iter().any(|&v| v != 0);
        let truncs = flags.truncateds.filter(|t| any(t));
        if !any(flags.dones) && truncs.is_none() && !any(flags.resets) {
            return out;
        }
        let flags = Flags {
            truncateds: truncs,
            ..flags
        };
        let mut lengths_differ = false;
        for (e, ending) in flags.endings(n) {
            match ending {
                FlagEnding::Done => out.terminated += 1,
                FlagEnding::Truncated => {
                    out.truncated += 1;
                    let length = frame_seq.saturating_sub(self.starts[e]) + 1;
                    match out.truncated_length {
                        None if !lengths_differ => out.truncated_length = Some(length),
                        Some(l) if l != length => {
                            lengths_differ = true;
                            out.truncated_length = None;
                        }
                        _ => {}
                    }
                    out.lengths_from_attach += u32::from(self.from_attach[e]);
                }
                FlagEnding::Reset => out.resets += 1,
            }
            self.starts[e] = frame_seq + 1;
            self.from_attach[e] = false;
        }
        out
    }
}
