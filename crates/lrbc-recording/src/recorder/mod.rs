//! A flight recorder: follows `frame_seq` and writes each consistent frame of the
//! recorded envs as a FlatBuffers `lrbc.recording.Frame` (`schema/recording.fbs`) on the
//! MCAP channel `/lrbc/frame`, and each command or control ring entry's payload, as
//! written, on `/lrbc/ring/<ring>`. Metadata records describe the segment (`lrbc.header`,
//! `lrbc.geometry`, `lrbc.names`, `lrbc.tool`) and, at the end, what was kept and lost
//! (`lrbc.counts`). Chunks are compressed with zstd unless asked otherwise, on the
//! writer's thread. The format (topics, the names of schemas
//! and metadata, the frame's encoder, the JSON messages) is `crate::format`'s.
//!
//! One [`Capture`] (`capture`) follows the segment and produces encoded messages; they go
//! to an MCAP file ([`FileSink`], `file`) and/or to a [`Rolling`] buffer of the last
//! seconds (`rolling`), which writes a complete file on demand. [`Recorder`] is a capture
//! feeding a file; [`flight::Flight`] runs a capture on its own thread for the window.

mod capture;
mod file;
pub mod flight;
mod images;
mod inbox;
mod message;
mod rolling;
mod writer;

pub use crate::format::Counts;
pub use capture::{Capture, ChannelDef, Kind, Message, Prelude, SchemaDef};
pub use file::FileSink;
pub use rolling::{Rolling, RollingCopy, RollingLimits};

use std::io::{Seek, Write};

use crate::format::Compression;
use lrbc::attach::Attached;
#[cfg(test)]
use lrbc::rpc::recording_fb as fb;
pub(super) use lrbc::sync::lock;

/// A recording that could not be written or started, as one line.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("writing the recording: {0}")]
    Mcap(#[from] mcap::McapError),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("env {env} does not exist (the segment has {num_envs} envs)")]
    NoSuchEnv { env: u32, num_envs: u32 },
    #[error("{0}")]
    Unsupported(&'static str),
    /// The detector could not be started, or its settings cannot be used on this
    /// segment.
    #[error(transparent)]
    Detect(#[from] lrbc_live::detect::DiagnosisError),
}

impl RecordError {
    /// The cause of a write error, without the layers around it (e.g. "No space left on
    /// device (os error 28)").
    pub fn cause(&self) -> String {
        match self {
            Self::Mcap(mcap::McapError::Io(io)) | Self::Io(io) => io.to_string(),
            other => other.to_string(),
        }
    }
}

/// Records one attachment into an MCAP file: a [`Capture`] on the caller's thread
/// feeding a [`FileSink`] on a writer thread (`writer`), so that looking at the segment
/// never waits for the disk.
pub struct Recorder<W: Write + Seek + Send + 'static> {
    capture: Capture,
    writer: writer::Writer<W>,
    /// Schemas and channels of the capture's prelude handed to the writer.
    synced: (usize, usize),
}

impl<W: Write + Seek + Send + 'static> std::fmt::Debug for Recorder<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("capture", &self.capture)
            .finish_non_exhaustive()
    }
}

impl<W: Write + Seek + Send + 'static> Recorder<W> {
    /// Starts a recording of `envs` of `attached` into `out`: writes the schemas,
    /// channels and the segment's metadata.
    pub fn new(attached: Attached, envs: Vec<u32>, out: W) -> Result<Self, RecordError> {
        Self::of(Capture::new(attached, envs)?, out)
    }

    /// A recording of `capture` (e.g. [`Capture::with_images`]) into `out`, its chunks
    /// compressed as recordings are by default.
    pub fn of(capture: Capture, out: W) -> Result<Self, RecordError> {
        Self::with_compression(capture, out, Compression::default())
    }

    /// A recording of `capture` into `out`, its chunks compressed with `compression` on
    /// the writer's thread.
    pub fn with_compression(
        capture: Capture,
        out: W,
        compression: Compression,
    ) -> Result<Self, RecordError> {
        let file = FileSink::with_compression(out, capture.prelude(), compression)?;
        let p = capture.prelude();
        let synced = (p.schemas.len(), p.channels.len());
        Ok(Self {
            writer: writer::Writer::start(file)?,
            capture,
            synced,
        })
    }

    pub fn attached(&self) -> &Attached {
        self.capture.attached()
    }

    /// The capture that feeds the file (and may feed other sinks: [`Recorder::poll_into`]).
    pub fn capture(&self) -> &Capture {
        &self.capture
    }

    pub fn capture_mut(&mut self) -> &mut Capture {
        &mut self.capture
    }

    pub fn counts(&self) -> Counts {
        self.capture.counts()
    }

    /// Waits up to `timeout` for a frame to record ([`Capture::wait`]).
    pub fn wait(&self, timeout: std::time::Duration) {
        self.capture.wait(timeout);
    }

    /// True while the recorder keeps to its budget on a busy machine.
    pub fn yielding(&self) -> bool {
        self.capture.yielding()
    }

    /// Bytes in the file so far.
    pub fn bytes_written(&self) -> u64 {
        self.writer.bytes_written()
    }

    /// Records a new frame, if one was published, and the ring entries published since
    /// the last call. True when anything was captured. An error is the file's: the
    /// writer stopped at it.
    pub fn poll(&mut self) -> Result<bool, RecordError> {
        self.poll_into(None)
    }

    /// [`Recorder::poll`], and the same messages appended to `also` (another sink of the
    /// one capture: a server). The messages' bytes are shared, not copied.
    pub fn poll_into(&mut self, also: Option<&mut Vec<Message>>) -> Result<bool, RecordError> {
        if let Some(e) = self.writer.take_error() {
            return Err(e);
        }
        let mut messages = Vec::new();
        self.capture.poll(&mut messages);
        if let Some(also) = also {
            also.extend(messages.iter().cloned());
        }
        let p = self.capture.prelude();
        if (p.schemas.len(), p.channels.len()) != self.synced {
            self.synced = (p.schemas.len(), p.channels.len());
            self.writer.prelude(p);
        }
        if messages.is_empty() {
            return Ok(false);
        }
        self.writer.messages(messages);
        Ok(true)
    }

    /// Polls as frames come from the follower until `frames` are recorded (tests; fails
    /// after 20 s without them).
    #[cfg(test)]
    pub(crate) fn poll_until_recorded(&mut self, frames: u64) {
        self.poll_until(|c| c.frames_recorded >= frames);
    }

    /// Polls as frames come from the follower until `done` says so (tests; fails after
    /// 20 s without it).
    #[cfg(test)]
    pub(crate) fn poll_until(&mut self, done: impl Fn(&Counts) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !done(&self.counts()) {
            assert!(
                std::time::Instant::now() < deadline,
                "waited 20 s: {:?}",
                self.counts()
            );
            self.wait(std::time::Duration::from_millis(10));
            self.poll().expect("the recording is written");
        }
    }

    /// Ends the current chunk and flushes it to the output: what was recorded so far
    /// reads back even if the process dies before [`Recorder::finish`].
    pub fn end_chunk(&mut self) -> Result<(), RecordError> {
        if let Some(e) = self.writer.take_error() {
            return Err(e);
        }
        self.writer.end_chunk();
        Ok(())
    }

    /// Writes what is left, `lrbc.counts` and the summary: the file is complete.
    pub fn finish(self) -> Result<Counts, RecordError> {
        self.finish_into_inner().map(|(c, _)| c)
    }

    /// Like [`Recorder::finish`], and gives back the output.
    pub fn finish_into_inner(mut self) -> Result<(Counts, W), RecordError> {
        // What the follower delivered before it let go is recorded too.
        self.capture.stop_following();
        self.poll()?;
        let c = self.capture.counts();
        let out = self.writer.finish()?.finish(&c)?;
        Ok((c, out))
    }
}

#[cfg(test)]
mod tests;
