//! [`RecordedActions`]: the actions of a recorded run, step by step, for a trainer that
//! replays them (`sim client --replay`). The file is read on a thread of its own, a few
//! steps ahead: memory does not grow with the file.
//!
//! A frame's actions are those that made it. In lock-step, those are the actions of
//! `action_seq = frame_seq`: in the frame's own copy when the recorder copied it before
//! the trainer wrote its next actions, else in the copy of the frame before, if that one
//! was copied late enough to catch them. A frame whose actions neither copy caught cannot
//! be replayed, and the replay ends there with one line. Reset flags are not replayed: the
//! engine clears them when it reads them, so a recording does not hold them reliably.

use std::fs::File;
use std::io::BufReader;
use std::path::Path;
use std::thread;

use crossbeam_channel::{Receiver, bounded};

use super::stream::{ReadError, StreamItem, read_recording};
use crate::format::{FrameError, RecFrame};

/// Steps read ahead of the trainer.
const AHEAD: usize = 64;

/// The actions of one step of a recorded run.
#[derive(Clone, Debug, PartialEq)]
pub struct StepActions {
    /// The frame they made (`frame_seq` in the recording).
    pub frame_seq: u64,
    /// Every env's, `num_envs × act_size`, env by env.
    pub actions: Vec<f32>,
}

/// Why a recording's actions cannot be replayed, as one line.
#[derive(Debug, thiserror::Error)]
pub enum ActionsError {
    #[error("{path}: {source}")]
    Open {
        path: String,
        source: std::io::Error,
    },
    #[error("{0}")]
    Read(#[from] ReadError),
    #[error("{0}")]
    Frame(#[from] FrameError),
    #[error("the recording holds no frame")]
    Empty,
    #[error(
        "the recording holds the actions of {recorded} of its {num_envs} envs: record with --all-envs to replay it"
    )]
    NotAllEnvs { recorded: usize, num_envs: usize },
    #[error(
        "frame_seq {frame_seq}: neither its copy nor the one before caught the actions that made it (record at a pace the recorder keeps up with)"
    )]
    ActionsNotCaught { frame_seq: u64 },
    #[error("the recording changes its sizes at frame_seq {frame_seq}")]
    SizesChanged { frame_seq: u64 },
    #[error("the reading thread stopped unexpectedly")]
    Reader,
}

/// What a reading thread hands over: a step's actions, or why it stopped.
type Item = Result<StepActions, ActionsError>;

/// Why a reading thread stops before the file's end.
enum Stop {
    Fail(ActionsError),
    /// The trainer stopped replaying: no more is wanted.
    Unwanted,
}

impl From<ReadError> for Stop {
    fn from(e: ReadError) -> Self {
        Self::Fail(e.into())
    }
}

impl From<ActionsError> for Stop {
    fn from(e: ActionsError) -> Self {
        Self::Fail(e)
    }
}

/// A recorded run's actions, step by step.
pub struct RecordedActions {
    pub num_envs: usize,
    pub act_size: usize,
    /// The first step's, read when opened.
    first: Option<StepActions>,
    steps: Receiver<Item>,
    thread: Option<thread::JoinHandle<()>>,
}

impl std::fmt::Debug for RecordedActions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordedActions")
            .field("num_envs", &self.num_envs)
            .field("act_size", &self.act_size)
            .finish_non_exhaustive()
    }
}

/// The actions that made frame `f`, with the copy before it (`prev`), if caught.
fn actions_that_made<'a>(f: &'a RecFrame, prev: Option<&'a RecFrame>) -> Option<&'a [f32]> {
    if f.action_seq == f.frame_seq {
        return Some(&f.actions);
    }
    prev.filter(|p| p.action_seq == f.frame_seq && p.frame_seq + 1 == f.frame_seq)
        .map(|p| p.actions.as_slice())
}

impl RecordedActions {
    /// Opens `path` and reads its first step (so that a file that cannot be replayed is
    /// told before any engine is stepped).
    pub fn open(path: &Path) -> Result<Self, ActionsError> {
        let file = File::open(path).map_err(|source| ActionsError::Open {
            path: path.display().to_string(),
            source,
        })?;
        let (tx, steps) = bounded::<Item>(AHEAD);
        let (sizes_tx, sizes_rx) = bounded::<(usize, usize)>(1);
        let thread = thread::Builder::new()
            .name("lrbc-replay-actions".into())
            .spawn(move || {
                let mut input = BufReader::new(file);
                let (mut prev, mut f) = (RecFrame::default(), RecFrame::default());
                let mut have_prev = false;
                let mut sizes: Option<(usize, usize)> = None;
                let read = read_recording(
                    &mut input,
                    |item| {
                        let StreamItem::Frame { log_ns, data } = item else {
                            return Ok(());
                        };
                        f.decode_into(log_ns, data)
                            .map_err(|e| Stop::Fail(e.into()))?;
                        if f.frame_seq == 0 {
                            // The frame written when the segment was created: no
                            // actions made it.
                            return Ok(());
                        }
                        let n = f.rewards.len();
                        let here = (n, f.act_size);
                        match sizes {
                            None => {
                                if !f.envs.iter().copied().eq(0..n as u32) {
                                    return Err(ActionsError::NotAllEnvs {
                                        recorded: f.envs.len(),
                                        num_envs: n,
                                    }
                                    .into());
                                }
                                sizes = Some(here);
                                // The receiver is gone: nobody waits for this any more.
                                let _ = sizes_tx.send(here);
                            }
                            Some(s) if s != here || f.envs.len() != n => {
                                return Err(ActionsError::SizesChanged {
                                    frame_seq: f.frame_seq,
                                }
                                .into());
                            }
                            Some(_) => {}
                        }
                        let Some(actions) = actions_that_made(&f, have_prev.then_some(&prev))
                        else {
                            return Err(ActionsError::ActionsNotCaught {
                                frame_seq: f.frame_seq,
                            }
                            .into());
                        };
                        let step = StepActions {
                            frame_seq: f.frame_seq,
                            actions: actions.to_vec(),
                        };
                        std::mem::swap(&mut prev, &mut f);
                        have_prev = true;
                        tx.send(Ok(step)).map_err(|_| Stop::Unwanted)
                    },
                    |_| {},
                );
                match read {
                    Ok(_) if sizes.is_none() => {
                        // The receiver is gone: nobody waits for this any more.
                        let _ = tx.send(Err(ActionsError::Empty));
                    }
                    Ok(_) | Err(Stop::Unwanted) => {}
                    Err(Stop::Fail(e)) => {
                        // The receiver is gone: nobody waits for this any more.
                        let _ = tx.send(Err(e));
                    }
                }
            })
            .map_err(|_| ActionsError::Reader)?;
        let mut replay = Self {
            num_envs: 0,
            act_size: 0,
            first: None,
            steps,
            thread: Some(thread),
        };
        match replay.steps.recv() {
            Ok(Ok(first)) => {
                let (n, a) = sizes_rx.recv().map_err(|_| ActionsError::Reader)?;
                replay.num_envs = n;
                replay.act_size = a;
                replay.first = Some(first);
                Ok(replay)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(ActionsError::Reader),
        }
    }

    /// The next step's actions; None at the recording's end.
    pub fn next_step(&mut self) -> Result<Option<StepActions>, ActionsError> {
        if let Some(first) = self.first.take() {
            return Ok(Some(first));
        }
        match self.steps.recv() {
            Ok(Ok(step)) => Ok(Some(step)),
            Ok(Err(e)) => Err(e),
            // The reader ended with the file.
            Err(_) => Ok(None),
        }
    }
}

impl Drop for RecordedActions {
    fn drop(&mut self) {
        // Stop a reader still ahead: its next send fails once the channel is gone.
        let (_, dropped) = bounded::<Item>(0);
        drop(std::mem::replace(&mut self.steps, dropped));
        if let Some(t) = self.thread.take() {
            // Only waits for the thread's end: a panic in it was printed when it happened.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::synthetic::{self, Spec};

    fn written(name: &str, spec: &Spec) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!(
            "lrbc-replay-actions-{}-{name}.mcap",
            std::process::id()
        ));
        synthetic::write(spec, File::create(&path).unwrap()).unwrap();
        path
    }

    fn frame(frame_seq: u64, action_seq: u64, actions: &[f32]) -> RecFrame {
        RecFrame {
            frame_seq,
            action_seq,
            actions: actions.to_vec(),
            ..RecFrame::default()
        }
    }

    #[test]
    fn a_frame_s_actions_are_its_own_copy_s_or_those_the_copy_before_caught() {
        let on_time = frame(5, 5, &[1.0]);
        assert_eq!(actions_that_made(&on_time, None), Some(&[1.0][..]));
        // Frame 5 copied late (it holds step 6's actions); frame 6 copied late too: the
        // actions that made frame 6 are in frame 5's copy.
        let (late5, late6) = (frame(5, 6, &[6.0]), frame(6, 7, &[7.0]));
        assert_eq!(actions_that_made(&late6, Some(&late5)), Some(&[6.0][..]));
        // Frame 5 copied on time and frame 6 late: step 6's actions were never copied.
        assert_eq!(actions_that_made(&late6, Some(&on_time)), None);
        // A copy before that is not the frame just before does not count.
        assert_eq!(actions_that_made(&late6, Some(&frame(4, 6, &[6.0]))), None);
    }

    #[test]
    fn every_step_s_actions_come_in_order_and_a_partial_recording_is_refused() {
        let spec = Spec {
            compression: crate::format::Compression::None,
            ..Spec::of(4, 3, 2, 50)
        };
        let path = written("all", &spec);
        let mut replay = RecordedActions::open(&path).unwrap();
        assert_eq!((replay.num_envs, replay.act_size), (4, 2));
        let mut seqs = Vec::new();
        while let Some(step) = replay.next_step().unwrap() {
            assert_eq!(step.actions.len(), 8);
            // The synthetic run's actions: sin(seq × 0.0025 + i).
            let x = step.frame_seq as f32 * 0.01 * 0.25;
            assert_eq!(step.actions[3], (x + 3.0).sin());
            seqs.push(step.frame_seq);
        }
        assert_eq!(seqs, (1..=50).collect::<Vec<_>>());
        // Dropped while its reader is ahead: it stops.
        let mut early = RecordedActions::open(&path).unwrap();
        assert!(early.next_step().unwrap().is_some());
        drop(early);
        let _ = std::fs::remove_file(&path);

        let partial = written("partial", &Spec::small(20, None));
        let e = RecordedActions::open(&partial).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the recording holds the actions of 3 of its 6 envs: record with --all-envs to replay it"
        );
        let _ = std::fs::remove_file(&partial);
        let gone = RecordedActions::open(&partial).unwrap_err();
        assert!(gone.to_string().contains("lrbc-replay-actions"), "{gone}");
    }
}
