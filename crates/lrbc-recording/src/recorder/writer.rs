//! The file side of a [`super::Recorder`]: a named thread that writes the capture's
//! messages into the file, so that the capture's looks at the segment never wait for
//! the disk (a chunk written out, a slow or full disk).

use std::io::{Seek, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender};

use super::lock;
use super::{FileSink, Message, Prelude, RecordError};

/// Messages handed over and not yet written, in bytes, at most: past it the capture
/// waits for the disk (and the frames that pass meanwhile are counted missed).
const MAX_IN_FLIGHT_BYTES: u64 = 64 << 20;

enum Work {
    /// The capture added schemas or channels.
    Prelude(Box<Prelude>),
    Messages(Vec<Message>, u64),
    EndChunk,
}

/// What the writer thread shares with the capture's thread.
#[derive(Debug, Default)]
struct WriterShared {
    /// Bytes handed over and not yet written.
    in_flight: AtomicU64,
    /// The first error; the thread stops at it.
    failed: Mutex<Option<RecordError>>,
}

/// A writer thread and the way to it.
pub(super) struct Writer<W: Write + Seek + Send + 'static> {
    tx: Option<Sender<Work>>,
    thread: Option<std::thread::JoinHandle<Option<FileSink<W>>>>,
    shared: Arc<WriterShared>,
    written: Arc<AtomicU64>,
}

impl<W: Write + Seek + Send + 'static> Writer<W> {
    /// Starts the thread writing into `file`, which holds the prelude already.
    pub fn start(file: FileSink<W>) -> Result<Self, RecordError> {
        let (tx, rx) = crossbeam_channel::bounded(4096);
        let shared = Arc::new(WriterShared::default());
        let written = file.written();
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("lrbc-record-writer".into())
            .spawn(move || run(file, &rx, &s))?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
            shared,
            written,
        })
    }

    /// The first write error, taken (the file is left as it is).
    pub fn take_error(&self) -> Option<RecordError> {
        lock(&self.shared.failed).take()
    }

    pub fn bytes_written(&self) -> u64 {
        // Relaxed: a figure for progress lines (see `FileSink::bytes_written`).
        self.written.load(Ordering::Relaxed)
    }

    pub fn prelude(&self, prelude: &Prelude) {
        self.send(Work::Prelude(Box::new(prelude.clone())));
    }

    /// Hands `messages` over; waits while the thread is more than
    /// [`MAX_IN_FLIGHT_BYTES`] behind.
    pub fn messages(&self, messages: Vec<Message>) {
        let bytes: u64 = messages.iter().map(|m| m.data.len() as u64).sum();
        // Acquire/Release: pairs with the writer thread's `fetch_sub` after a write, so
        // that the bytes it finished with are seen as gone.
        while self.shared.in_flight.load(Ordering::Acquire) > MAX_IN_FLIGHT_BYTES
            && self.thread.as_ref().is_some_and(|t| !t.is_finished())
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        self.shared.in_flight.fetch_add(bytes, Ordering::AcqRel);
        self.send(Work::Messages(messages, bytes));
    }

    pub fn end_chunk(&self) {
        self.send(Work::EndChunk);
    }

    fn send(&self, w: Work) {
        // A thread that stopped has its error in `failed`; the work is not needed.
        if let Some(tx) = &self.tx {
            // The receiver is gone: nobody waits for this any more.
            let _ = tx.send(w);
        }
    }

    /// Waits for everything handed over to be written; gives back the file, or the first
    /// error.
    pub fn finish(mut self) -> Result<FileSink<W>, RecordError> {
        self.tx = None;
        let file = self.thread.take().and_then(|t| t.join().ok().flatten());
        if let Some(e) = self.take_error() {
            return Err(e);
        }
        file.ok_or_else(|| {
            RecordError::Io(std::io::Error::other(
                "the recording's writer thread failed",
            ))
        })
    }
}

impl<W: Write + Seek + Send + 'static> Drop for Writer<W> {
    fn drop(&mut self) {
        // What was handed over is written before the file is closed: a recorder that
        // stops on an error leaves a file that reads up to its last whole chunk.
        self.tx = None;
        if let Some(t) = self.thread.take() {
            // Only waits for the thread's end: a panic in it was printed when it happened.
            let _ = t.join();
        }
    }
}

fn run<W: Write + Seek>(
    mut file: FileSink<W>,
    rx: &Receiver<Work>,
    shared: &WriterShared,
) -> Option<FileSink<W>> {
    // The writer is an observer too: it runs in the time the engine and trainer leave.
    lrbc_platform::set_thread_role(lrbc_platform::ThreadRole::Background);
    for work in rx {
        let result = match work {
            Work::Prelude(p) => file.sync(&p),
            Work::Messages(messages, bytes) => {
                let r = messages.iter().try_for_each(|m| file.write(m));
                // AcqRel: pairs with the Acquire load in `Writer::messages`.
                shared.in_flight.fetch_sub(bytes, Ordering::AcqRel);
                r
            }
            Work::EndChunk => file.end_chunk(),
        };
        if let Err(e) = result {
            *lock(&shared.failed) = Some(e);
            return None;
        }
    }
    Some(file)
}
