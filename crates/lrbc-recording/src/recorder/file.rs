//! The file sink: writes a prelude and messages to an MCAP file, and at the end the
//! counts and the summary.

use std::collections::BTreeMap;
use std::io::{Seek, SeekFrom, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{Counts, Message, Prelude, RecordError};
use crate::format::{COUNTS_METADATA, Compression, PROFILE};

/// A writer that counts the bytes of the file (its length, shared with the recorder).
#[derive(Debug)]
pub(super) struct Counting<W> {
    inner: W,
    pos: u64,
    len: Arc<AtomicU64>,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.pos += n as u64;
        // Relaxed: a figure for progress lines, with no data behind it (paired with the
        // load in `FileSink::bytes_written`).
        self.len.fetch_max(self.pos, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

impl<W: Seek> Seek for Counting<W> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = self.inner.seek(to)?;
        Ok(self.pos)
    }
}

/// An MCAP file being written.
pub struct FileSink<W: Write + Seek> {
    writer: mcap::Writer<Counting<W>>,
    written: Arc<AtomicU64>,
    /// The file's schema id of each prelude schema.
    schema_ids: Vec<u16>,
    /// The file's channel id of each prelude channel.
    channel_ids: Vec<u16>,
    sequences: Vec<u32>,
    frames: u64,
}

impl<W: Write + Seek> std::fmt::Debug for FileSink<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileSink")
            .field("frames", &self.frames)
            .finish_non_exhaustive()
    }
}

impl<W: Write + Seek> FileSink<W> {
    /// Starts a file on `out` with the schemas, channels and metadata of `prelude`, its
    /// chunks compressed as recordings are by default.
    pub fn new(out: W, prelude: &Prelude) -> Result<Self, RecordError> {
        Self::with_compression(out, prelude, Compression::default())
    }

    /// Starts a file on `out` with the schemas, channels and metadata of `prelude`, its
    /// chunks compressed with `compression` (on the thread that writes, never more).
    pub fn with_compression(
        out: W,
        prelude: &Prelude,
        compression: Compression,
    ) -> Result<Self, RecordError> {
        let options = crate::format::write_options(
            mcap::WriteOptions::new()
                .profile(PROFILE)
                .library(concat!("lrbc-inspector ", env!("CARGO_PKG_VERSION"))),
            compression,
        )
        .map_err(RecordError::Unsupported)?;
        let written = Arc::new(AtomicU64::new(0));
        let writer = options.create(Counting {
            inner: out,
            pos: 0,
            len: Arc::clone(&written),
        })?;
        let mut sink = Self {
            writer,
            written,
            schema_ids: Vec::new(),
            channel_ids: Vec::new(),
            sequences: Vec::new(),
            frames: 0,
        };
        sink.sync(prelude)?;
        for (name, metadata) in &prelude.metadata {
            sink.writer.write_metadata(&mcap::records::Metadata {
                name: name.clone(),
                metadata: metadata.clone(),
            })?;
        }
        Ok(sink)
    }

    /// Adds the schemas and channels of `prelude` the file does not have yet (a capture
    /// adds channels as streams show up).
    pub fn sync(&mut self, prelude: &Prelude) -> Result<(), RecordError> {
        for s in prelude.schemas.iter().skip(self.schema_ids.len()) {
            let id = self.writer.add_schema(&s.name, &s.encoding, &s.data)?;
            self.schema_ids.push(id);
        }
        for c in prelude.channels.iter().skip(self.channel_ids.len()) {
            let schema = c
                .schema
                .and_then(|i| self.schema_ids.get(i).copied())
                .unwrap_or(0);
            let id =
                self.writer
                    .add_channel(schema, &c.topic, &c.message_encoding, &BTreeMap::new())?;
            self.channel_ids.push(id);
            self.sequences.push(0);
        }
        Ok(())
    }

    /// The count of bytes in the file, as it grows (for another thread's progress line).
    pub fn written(&self) -> Arc<AtomicU64> {
        Arc::clone(&self.written)
    }

    /// Bytes in the file so far.
    pub fn bytes_written(&self) -> u64 {
        // Relaxed: see `Counting::write`.
        self.written.load(Ordering::Relaxed)
    }

    /// Frames written so far.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// Writes one message (of a channel of the prelude; others are skipped).
    pub fn write(&mut self, m: &Message) -> Result<(), RecordError> {
        let (Some(&channel_id), Some(sequence)) = (
            self.channel_ids.get(m.channel),
            self.sequences.get_mut(m.channel),
        ) else {
            return Ok(());
        };
        self.writer.write_to_known_channel(
            &mcap::records::MessageHeader {
                channel_id,
                sequence: *sequence,
                log_time: m.log_time,
                publish_time: m.publish_time,
            },
            &m.data,
        )?;
        *sequence = sequence.wrapping_add(1);
        if m.is_frame() {
            self.frames += 1;
        }
        Ok(())
    }

    /// Ends the current chunk and flushes the output.
    pub fn end_chunk(&mut self) -> Result<(), RecordError> {
        self.writer.flush()?;
        Ok(())
    }

    /// Writes `lrbc.counts` and the summary, flushes, and gives back the output.
    pub fn finish(mut self, counts: &Counts) -> Result<W, RecordError> {
        self.writer.write_metadata(&mcap::records::Metadata {
            name: COUNTS_METADATA.into(),
            metadata: counts.to_metadata(),
        })?;
        self.writer.finish()?;
        let mut out = self.writer.into_inner().inner;
        out.flush()?;
        Ok(out)
    }
}
