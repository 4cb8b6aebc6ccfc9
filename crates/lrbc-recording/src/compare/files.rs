//! Two recordings compared from end to end: each is read on a thread of its own, in
//! blocks (`read_recording`), finds its own episodes and hands its decoded frames over a
//! channel of a few; the caller's thread aligns them by their place from each run's
//! start, compares them and tallies the episodes that ended at frames both hold. Memory
//! does not grow with the files: a few frames of each are held at a time. The events
//! come last: those each file's recorder wrote, read through its index.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;

use crossbeam_channel::{Receiver, Sender, bounded};

use lrbc_live::episodes::Episode;

use super::{
    CompareCounts, ComparedRun, Comparer, Divergence, EpisodesCompared, EventsCompared, Tolerance,
};
use crate::format::{FrameError, NAMES_METADATA, RecFrame};
use crate::replay::{
    End, EventsError, ReadError, RecordedEpisodes, Recording, ReplayError, StreamItem,
    read_recording,
};

/// Frames in flight from each file's reader.
const IN_FLIGHT: usize = 4;

/// A comparison that could not be made, as one line.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("{}: {path}: {source}", run.as_str())]
    Open {
        run: ComparedRun,
        path: String,
        source: std::io::Error,
    },
    #[error("{}: {source}", run.as_str())]
    Read { run: ComparedRun, source: ReadError },
    #[error("{}: {source}", run.as_str())]
    Frame {
        run: ComparedRun,
        source: FrameError,
    },
    #[error("{}: the reading thread stopped unexpectedly", run.as_str())]
    Reader { run: ComparedRun },
    /// The file could not be opened again to read its events.
    #[error("{}: its events: {source}", run.as_str())]
    EventsOpen {
        run: ComparedRun,
        source: ReplayError,
    },
    #[error("{}: its events: {source}", run.as_str())]
    Events {
        run: ComparedRun,
        source: EventsError,
    },
}

/// What a whole comparison found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FilesCompared {
    pub counts: CompareCounts,
    /// Each diverged env's first divergence, ascending by env.
    pub divergences: Vec<Divergence>,
    /// How each file ended (a truncated one was not finished by its recorder).
    pub end_a: End,
    pub end_b: End,
    /// A's names of the values (`lrbc.names`: `obs.I` and `act.I` to a name).
    pub names: BTreeMap<String, String>,
    /// Both runs' episodes that ended at frames both hold (none when the comparison
    /// stopped at its first divergence).
    pub episodes: EpisodesCompared,
    /// Both runs' events first seen at frames both hold (none when it stopped).
    pub events: EventsCompared,
}

impl FilesCompared {
    /// The name of observation or action `channel` in A, if the recording has one.
    pub fn name_of(&self, channel: lrbc_live::check::Channel) -> Option<&str> {
        use lrbc_live::check::Channel;
        let key = match channel {
            Channel::Obs(i) => format!("obs.{i}"),
            Channel::Act(i) => format!("act.{i}"),
            Channel::Reward => return None,
        };
        self.names.get(&key).map(String::as_str)
    }
}

/// A decoded frame and the episodes of its run that ended at it.
#[derive(Default)]
pub(super) struct ReadFrame {
    pub(super) frame: RecFrame,
    pub(super) ended: Vec<Episode>,
    /// Frames of the file before this one that the reader skipped undecoded (they were
    /// behind what was wanted).
    pub(super) skipped_before: u64,
}

/// What a reader does besides decoding the frames.
#[derive(Clone, Debug, Default)]
pub(super) struct ReadWork {
    /// Find the run's episodes.
    pub(super) episodes: bool,
    /// Skip, undecoded, the frames whose `frame_seq` is below this (the comparison is
    /// past them).
    pub(super) wanted_from: Option<Arc<AtomicU64>>,
    /// Run in this role (a live run's comparison takes only the time the engine
    /// and the trainer leave over).
    pub(super) role: Option<lrbc_platform::ThreadRole>,
}

/// What a reader found besides the frames.
pub(super) struct ReadOut {
    pub(super) end: End,
    pub(super) names: BTreeMap<String, String>,
}

/// Why a reader stopped before its file's end.
enum Stop {
    Read(ReadError),
    Frame(FrameError),
    /// The comparison needs no more frames.
    Unwanted,
}

impl From<ReadError> for Stop {
    fn from(e: ReadError) -> Self {
        Self::Read(e)
    }
}

/// Compares recordings `a` and `b` with `tolerance`; `on_divergence` is told each env's
/// first divergence as it is found (in frame order). `stop_at_first`: the comparison ends
/// at the first frame with a divergence.
pub fn compare_files(
    a: &Path,
    b: &Path,
    tolerance: Tolerance,
    stop_at_first: bool,
    mut on_divergence: impl FnMut(&Divergence),
) -> Result<FilesCompared, CompareError> {
    let work = ReadWork {
        episodes: true,
        ..ReadWork::default()
    };
    let reader_a = Reader::spawn(ComparedRun::A, a, work.clone())?;
    let reader_b = Reader::spawn(ComparedRun::B, b, work)?;
    let (frames_a, spare_a) = (&reader_a.frames, &reader_a.spares);
    let (frames_b, spare_b) = (&reader_b.frames, &reader_b.spares);
    let mut comparer = Comparer::new(tolerance);
    let mut episodes = EpisodesCompared::default();
    let mut first: (Option<u64>, Option<u64>) = (None, None);
    // The frame_seq of each run's last frame compared.
    let mut last: Option<(u64, u64)> = None;
    let mut stopped = false;
    // The place from its run's start of a frame (None: before the run's first frame,
    // which a recording of one run does not hold; it is not compared).
    let place = |start: &mut Option<u64>, f: &RecFrame| {
        let s = *start.get_or_insert(f.frame_seq);
        f.frame_seq.checked_sub(s)
    };
    let mut next_a = frames_a.recv().ok();
    let mut next_b = frames_b.recv().ok();
    loop {
        let ka = next_a.as_deref().map(|f| place(&mut first.0, &f.frame));
        let kb = next_b.as_deref().map(|f| place(&mut first.1, &f.frame));
        let take = match (ka, kb) {
            (None, None) => break,
            // A frame from before its run's first (a second run in one file).
            (Some(None), _) => Take::A,
            (_, Some(None)) => Take::B,
            (Some(Some(x)), Some(Some(y))) if x == y => Take::Both(x),
            (Some(Some(x)), Some(Some(y))) if x < y => Take::A,
            (Some(_), Some(_)) | (None, Some(_)) => Take::B,
            (Some(_), None) => Take::A,
        };
        match take {
            Take::Both(k) => {
                let (fa, fb) = (next_a.take(), next_b.take());
                let mut stop = false;
                if let (Some(fa), Some(fb)) = (&fa, &fb) {
                    let found = comparer.frame(k, &fa.frame, &fb.frame);
                    found.iter().for_each(&mut on_divergence);
                    stop = stop_at_first && !found.is_empty();
                    episodes.ended(ComparedRun::A, &fa.ended);
                    episodes.ended(ComparedRun::B, &fb.ended);
                    episodes.envs_at_least(fa.frame.rewards.len().max(fb.frame.rewards.len()));
                    last = Some((fa.frame.frame_seq, fb.frame.frame_seq));
                }
                recycle(spare_a, fa);
                recycle(spare_b, fb);
                if stop {
                    stopped = true;
                    break;
                }
                next_a = frames_a.recv().ok();
                next_b = frames_b.recv().ok();
            }
            Take::A => {
                comparer.only_a(1);
                recycle(spare_a, next_a.take());
                next_a = frames_a.recv().ok();
            }
            Take::B => {
                comparer.only_b(1);
                recycle(spare_b, next_b.take());
                next_b = frames_b.recv().ok();
            }
        }
    }
    let out_a = reader_a.finish()?;
    let out_b = reader_b.finish()?;
    let mut events = EventsCompared::default();
    if stopped {
        episodes = EpisodesCompared::default();
    } else if let (Some((last_a, last_b)), Some(first_a), Some(first_b)) = (last, first.0, first.1)
    {
        for (run, path, span) in [
            (ComparedRun::A, a, (first_a, last_a)),
            (ComparedRun::B, b, (first_b, last_b)),
        ] {
            // Those its recorder wrote (finding them again would read the file again).
            let found = Recording::open(path)
                .map_err(|source| CompareError::EventsOpen { run, source })?
                .recorded_events()
                .map_err(|source| CompareError::Events { run, source })?;
            if let Some((found, _)) = found {
                events.count(run, &found, span.0, span.1);
                if run == ComparedRun::B {
                    events.recorded_b = true;
                } else {
                    events.recorded_a = true;
                }
            }
        }
    }
    Ok(FilesCompared {
        counts: comparer.counts(),
        divergences: comparer.divergences().copied().collect(),
        end_a: out_a.end,
        end_b: out_b.end,
        names: out_a.names,
        episodes,
        events,
    })
}

/// Which frame the comparison takes next.
enum Take {
    /// Both, at this place from their runs' starts.
    Both(u64),
    /// A's alone (B lacks it), or B's.
    A,
    B,
}

/// A recording read on a thread of its own: its frames, in file order, and the way back
/// for their buffers.
pub(super) struct Reader {
    run: ComparedRun,
    pub(super) frames: Receiver<Box<ReadFrame>>,
    pub(super) spares: Sender<Box<ReadFrame>>,
    thread: thread::JoinHandle<Result<ReadOut, CompareError>>,
}

/// Hands a frame's buffers back to its reader (dropped when the reader has enough).
pub(super) fn recycle(spare: &Sender<Box<ReadFrame>>, frame: Option<Box<ReadFrame>>) {
    if let Some(f) = frame {
        // A full channel of spares, or a reader already done: the frame is dropped.
        let _ = spare.try_send(f);
    }
}

impl Reader {
    pub(super) fn spawn(
        run: ComparedRun,
        path: &Path,
        work: ReadWork,
    ) -> Result<Self, CompareError> {
        let file = File::open(path).map_err(|source| CompareError::Open {
            run,
            path: path.display().to_string(),
            source,
        })?;
        let (tx, frames) = bounded::<Box<ReadFrame>>(IN_FLIGHT);
        let (spares, spare_rx) = bounded::<Box<ReadFrame>>(IN_FLIGHT + 2);
        let thread = thread::Builder::new()
            .name(format!("lrbc-compare-{}", run.as_str()))
            .spawn(move || {
                if let Some(role) = work.role {
                    lrbc_platform::set_thread_role(role);
                }
                let mut input = BufReader::new(file);
                let mut names = BTreeMap::new();
                let mut accountant: Option<RecordedEpisodes> = None;
                let mut skipped = 0u64;
                let read = read_recording(
                    &mut input,
                    |item| {
                        let (log_ns, data) = match item {
                            StreamItem::Frame { log_ns, data } => (log_ns, data),
                            StreamItem::Metadata(m) if m.name == NAMES_METADATA => {
                                names.clone_from(&m.metadata);
                                return Ok(());
                            }
                            _ => return Ok(()),
                        };
                        if let Some(wanted) = &work.wanted_from {
                            // Acquire: pairs with the comparison's Release store of the
                            // place it has reached (a plain count, nothing behind it).
                            let from = wanted.load(Ordering::Acquire);
                            if RecFrame::frame_seq_of(data).is_some_and(|seq| seq < from) {
                                skipped += 1;
                                return Ok(());
                            }
                        }
                        let mut f = spare_rx.try_recv().unwrap_or_default();
                        f.frame.decode_into(log_ns, data).map_err(Stop::Frame)?;
                        f.ended.clear();
                        f.skipped_before = std::mem::take(&mut skipped);
                        if work.episodes {
                            let frame = &f.frame;
                            accountant
                                .get_or_insert_with(|| {
                                    RecordedEpisodes::of(
                                        frame.rewards.len() as u32,
                                        frame.obs_size as u32,
                                        frame.act_size as u32,
                                    )
                                })
                                .frame(frame, &mut f.ended);
                        }
                        tx.send(f).map_err(|_| Stop::Unwanted)
                    },
                    |_| {},
                );
                match read {
                    Ok(end) => Ok(ReadOut { end, names }),
                    // The comparison ended first: how the file ends is not known.
                    Err(Stop::Unwanted) => Ok(ReadOut {
                        end: End::default(),
                        names,
                    }),
                    Err(Stop::Read(source)) => Err(CompareError::Read { run, source }),
                    Err(Stop::Frame(source)) => Err(CompareError::Frame { run, source }),
                }
            })
            .map_err(|_| CompareError::Reader { run })?;
        Ok(Self {
            run,
            frames,
            spares,
            thread,
        })
    }

    /// How the file ended, once the reader stopped. Dropping the channel first stops a
    /// reader that is still reading (a comparison that stopped at its first divergence).
    pub(super) fn finish(self) -> Result<ReadOut, CompareError> {
        let Self {
            run,
            frames,
            spares,
            thread,
        } = self;
        drop((frames, spares));
        thread.join().map_err(|_| CompareError::Reader { run })?
    }
}
