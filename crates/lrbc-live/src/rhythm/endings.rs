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
    /// (an array shorter than `num_envs` leaves the rest clear). The flags are read a
    /// block of 64 envs at a time, eight to a word, into a bit per env and array: a block
    /// with no flag set (most, most frames) is passed over at once, and in the others
    /// each env with a flag is found and told apart by its bits alone.
    pub fn endings(&self, num_envs: usize) -> impl Iterator<Item = (usize, FlagEnding)> + '_ {
        SetFlags {
            flags: *self,
            num_envs,
            next: 0,
            base: 0,
            block: Block::default(),
        }
    }
}

/// One block of 64 envs' flags, a bit per env (bit `i`: env `base + i`).
#[derive(Clone, Copy, Debug, Default)]
struct Block {
    dones: u64,
    truncateds: u64,
    resets: u64,
}

impl Block {
    /// Envs `start..start + 64` of the first `num_envs`.
    fn read(f: &Flags<'_>, start: usize, num_envs: usize) -> Self {
        let end = (start + 64).min(num_envs);
        Self {
            dones: nonzero_bits(f.dones, start, end),
            truncateds: f.truncateds.map_or(0, |t| nonzero_bits(t, start, end)),
            resets: nonzero_bits(f.resets, start, end),
        }
    }

    /// The envs not yet handed out with a flag set.
    fn any(&self) -> u64 {
        self.dones | self.truncateds | self.resets
    }
}

/// A bit per byte of `a[start..end]` that is not 0 (bit `i`: byte `start + i`; bytes
/// past `a`'s end are 0). `end - start` is at most 64.
fn nonzero_bits(a: &[u8], start: usize, end: usize) -> u64 {
    let Some(bytes) = a.get(start..end.min(a.len())) else {
        return 0;
    };
    let words = bytes.chunks_exact(8);
    let rest = words.remainder();
    let mut bits = 0u64;
    let mut at = 0;
    for w in words {
        let mut b = [0u8; 8];
        b.copy_from_slice(w);
        bits |= u64::from(nonzero_bytes(u64::from_le_bytes(b))) << at;
        at += 8;
    }
    for &b in rest {
        bits |= u64::from(b != 0) << at;
        at += 1;
    }
    bits
}

/// A bit per byte of `w` (little-endian) that is not 0.
fn nonzero_bytes(w: u64) -> u8 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    // Bit 7 of each byte that is not 0: its low seven bits plus 0x7f carry into bit 7
    // unless they are all 0, and bit 7 itself comes from `w`.
    let high = (((w & LOW7) + LOW7) | w) & !LOW7;
    // Byte k's bit (at 8k once shifted down) lands at bit 56 + k: the multiplier holds
    // bits 56 - 7k, and no two products share a bit, so nothing carries.
    ((high >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8
}

/// [`Flags::endings`]: the envs with a flag set, a block of 64 envs at a time.
struct SetFlags<'a> {
    flags: Flags<'a>,
    num_envs: usize,
    /// The first env of the next block to read.
    next: usize,
    /// The first env of the block read last.
    base: usize,
    /// The block read last, the envs already handed out cleared.
    block: Block,
}

impl Iterator for SetFlags<'_> {
    type Item = (usize, FlagEnding);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let any = self.block.any();
            if any != 0 {
                let bit = any & any.wrapping_neg();
                let b = &mut self.block;
                let ending = if b.dones & bit != 0 {
                    FlagEnding::Done
                } else if b.truncateds & bit != 0 {
                    FlagEnding::Truncated
                } else {
                    FlagEnding::Reset
                };
                b.dones &= !bit;
                b.truncateds &= !bit;
                b.resets &= !bit;
                return Some((self.base + bit.trailing_zeros() as usize, ending));
            }
            if self.next >= self.num_envs {
                return None;
            }
            self.base = self.next;
            self.block = Block::read(&self.flags, self.next, self.num_envs);
            self.next += 64;
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
