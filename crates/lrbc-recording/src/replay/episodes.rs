//! A recording's episodes: its frames through the same accountant as live
//! (`lrbc_live::episodes`). Every recorded frame holds every env's rewards and flags, so
//! every env's episodes are found; a non-finite observation or action is seen in the
//! recorded envs' rows. Frames the recorder did not keep (missed, torn, skipped) make
//! the episodes they fall in incomplete, as live.

use lrbc::layout::Geometry;
use lrbc_live::check::{ChannelKind, Checker, Fault, Limits};
use lrbc_live::episodes::{Accountant, BookDetail, Episode, EpisodeBook, FrameView};

use super::events::check_frame;
use super::reader::{Damage, Recording};
use crate::format::RecFrame;

/// Why a recording's episodes were not counted, as one line.
#[derive(Debug, thiserror::Error)]
pub enum EpisodesError {
    /// The file is damaged where the frames are.
    #[error(transparent)]
    Damage(#[from] Damage),
    /// Its progress said to stop before the end of the file.
    #[error("stopped")]
    Stopped,
}

/// The accountant over recorded frames, in file order.
pub struct RecordedEpisodes {
    num_envs: u32,
    accountant: Option<Accountant>,
    checker: Option<Checker>,
}

impl std::fmt::Debug for RecordedEpisodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordedEpisodes")
            .field("num_envs", &self.num_envs)
            .finish_non_exhaustive()
    }
}

impl RecordedEpisodes {
    pub fn new(g: &Geometry) -> Self {
        Self::of(g.num_envs, g.obs_size, g.act_size)
    }

    /// For frames of `num_envs` envs with rows of `obs_size` observations and `act_size`
    /// actions (what a recorded frame says of itself).
    pub fn of(num_envs: u32, obs_size: u32, act_size: u32) -> Self {
        Self {
            num_envs,
            accountant: None,
            checker: Checker::new(
                &Limits::default(),
                num_envs,
                obs_size,
                act_size,
                &lrbc::layout::Names::default(),
            )
            .ok(),
        }
    }

    /// Takes frame `f`; the episodes that end at it go to `out`. The first frame's
    /// episodes began before the recording unless it is the run's first frame.
    pub fn frame(&mut self, f: &RecFrame, out: &mut Vec<Episode>) {
        let n = self.num_envs;
        let a = self
            .accountant
            .get_or_insert_with(|| Accountant::new(n, f.frame_seq.saturating_sub(1)));
        let nonfinite: Vec<u32> = match &mut self.checker {
            Some(c) => check_frame(c, f)
                .hits
                .iter()
                .filter(|h| h.fault == Fault::NonFinite && h.channel.kind() != ChannelKind::Reward)
                .map(|h| h.env)
                .collect(),
            None => Vec::new(),
        };
        let view = FrameView {
            frame_seq: f.frame_seq,
            time_ns: f.sampled_ns,
            rewards: &f.rewards,
            dones: &f.dones,
            truncateds: f.truncateds.as_deref(),
            resets: &f.resets,
        };
        a.frame(&view, nonfinite, out);
    }

    /// The accountant, once a frame was taken.
    pub fn accountant(&self) -> Option<&Accountant> {
        self.accountant.as_ref()
    }

    /// The end of the file: the episodes going on go to `out` (ending `running`).
    pub fn finish(&mut self, out: &mut Vec<Episode>) {
        if let Some(a) = &mut self.accountant {
            a.finish(out);
        }
    }
}

/// Every episode of `rec`, in a book that keeps what `detail` says (its episodes going on
/// at the end of the file as running). `progress` is told the share read so far and stops
/// the pass when it returns false ([`EpisodesError::Stopped`]).
pub fn recording_episodes(
    rec: &mut Recording,
    detail: BookDetail,
    mut progress: impl FnMut(f64) -> bool,
) -> Result<EpisodeBook, EpisodesError> {
    let g = rec.geometry.clone();
    let mut book = EpisodeBook::with_detail(g.num_envs, detail);
    let mut acc = RecordedEpisodes::new(&g);
    let mut out = Vec::new();
    let (t0, t1) = rec.time_range().unwrap_or((0, 0));
    let span = t1.saturating_sub(t0).max(1) as f64;
    let (mut frames, mut stopped, mut last_ns) = (0u64, false, 0u64);
    rec.frames_between(0, u64::MAX, |f| {
        frames += 1;
        if frames.is_multiple_of(256) && !progress(f.log_ns.saturating_sub(t0) as f64 / span) {
            stopped = true;
            return false;
        }
        acc.frame(&f, &mut out);
        for e in out.drain(..) {
            book.apply(&e);
        }
        last_ns = f.sampled_ns;
        true
    })?;
    if stopped {
        return Err(EpisodesError::Stopped);
    }
    if let Some(a) = acc.accountant() {
        book.progress(a, last_ns);
    }
    Ok(book)
}
