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
    /// (an array shorter than `num_envs` leaves the rest clear). The flags are read eight
    /// envs to a word: a word with no flag set in any array (most, most frames) is passed
    /// over at once, and in the others only the envs with a flag are looked at.
    pub fn endings(&self, num_envs: usize) -> impl Iterator<Item = (usize, FlagEnding)> + '_ {
        SetFlags {
            flags: *self,
            num_envs,
            next: 0,
            base: 0,
            set: 0,
        }
    }

    /// How env `e` ended, by its flags; None with none set.
    fn ending_of(&self, e: usize) -> Option<FlagEnding> {
        let flag = |a: &[u8]| a.get(e).is_some_and(|&v| v != 0);
        if flag(self.dones) {
            Some(FlagEnding::Done)
        } else if self.truncateds.is_some_and(flag) {
            Some(FlagEnding::Truncated)
        } else if flag(self.resets) {
            Some(FlagEnding::Reset)
        } else {
            None
        }
    }
}

/// [`Flags::endings`]: the envs with a flag set, a word of eight envs at a time.
struct SetFlags<'a> {
    flags: Flags<'a>,
    num_envs: usize,
    /// The first env of the next word to read.
    next: usize,
    /// The first env of the word read last.
    base: usize,
    /// In the word read last, bit 7 of each byte whose env has a flag set and is not yet
    /// handed out.
    set: u64,
}

impl SetFlags<'_> {
    /// Envs `start..start + 8` of `a` as a little-endian word, 0 for envs past the end of
    /// `a` or at or beyond `num_envs`.
    fn word(a: &[u8], start: usize, num_envs: usize) -> u64 {
        let end = (start + 8).min(a.len()).min(num_envs);
        match a.get(start..end) {
            Some(bytes) if bytes.len() == 8 => {
                let mut w = [0u8; 8];
                w.copy_from_slice(bytes);
                u64::from_le_bytes(w)
            }
            Some(bytes) => bytes
                .iter()
                .enumerate()
                .fold(0, |w, (i, &b)| w | (u64::from(b) << (8 * i))),
            None => 0,
        }
    }
}

impl Iterator for SetFlags<'_> {
    type Item = (usize, FlagEnding);

    fn next(&mut self) -> Option<Self::Item> {
        const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
        loop {
            while self.set != 0 {
                let e = self.base + (self.set.trailing_zeros() / 8) as usize;
                self.set &= self.set - 1;
                if let Some(ending) = self.flags.ending_of(e) {
                    return Some((e, ending));
                }
            }
            if self.next >= self.num_envs {
                return None;
            }
            let (start, n, f) = (self.next, self.num_envs, &self.flags);
            self.next += 8;
            let any = Self::word(f.dones, start, n)
                | f.truncateds.map_or(0, |t| Self::word(t, start, n))
                | Self::word(f.resets, start, n);
            self.base = start;
            // Bit 7 of each byte that is not 0: its low seven bits plus 0x7f carry into
            // bit 7 unless they are all 0, and bit 7 itself comes from `any`.
            self.set = (((any & LOW7) + LOW7) | any) & !LOW7;
        }
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
