//! Camera images compressed for the clients (`serve --image-format png|jpeg`) on a
//! thread of its own: the serving thread hands each raw image over and goes on, so
//! encoding never holds up the ring traffic. The newest image of each channel waits for
//! the encoder (a newer one replaces it, counted), so the work never queues up: at
//! worst the encoder takes one core's spare time and the images come less often.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::hub::Hub;
use super::outbox::Class;
use lrbc::sync::lock;
use lrbc_recording::format::ImageEncoding;

/// What the encoder did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Compressed {
    /// Images compressed and handed to at least one client.
    pub images: u64,
    /// Bytes of those images.
    pub bytes: u64,
    /// Images replaced by a newer one of their channel while the encoder was busy.
    pub replaced: u64,
    /// Images that could not be compressed (an encoding PNG and JPEG cannot hold).
    pub failed: u64,
}

#[derive(Default)]
struct Waiting {
    /// The newest raw image of each server channel not compressed yet: (log time, bytes).
    newest: HashMap<u64, (u64, Arc<[u8]>)>,
    /// Channels in the order their images came.
    order: VecDeque<u64>,
    stop: bool,
}

/// The images waiting for the compressing thread, its wake-up and its counts.
#[derive(Default)]
struct CompressQueue {
    waiting: Mutex<Waiting>,
    wake: Condvar,
    images: AtomicU64,
    bytes: AtomicU64,
    replaced: AtomicU64,
    failed: AtomicU64,
    told_failure: AtomicBool,
}

/// The encoder's thread and what it shares with the server.
pub(super) struct Compressor {
    shared: Arc<CompressQueue>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Compressor {
    /// Starts the encoder; its images go to `hub`'s clients subscribed to their channel.
    pub fn start(format: ImageEncoding, hub: Arc<Hub>) -> std::io::Result<Self> {
        let shared = Arc::new(CompressQueue::default());
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("serve-compress".into())
            .spawn(move || {
                // Spare time only: the engine, the trainer and the ring traffic first.
                lrbc_platform::set_thread_role(lrbc_platform::ThreadRole::Background);
                let mut builder = flatbuffers::FlatBufferBuilder::new();
                while let Some((channel, log_time, raw)) = next(&s) {
                    match lrbc_recording::format::compress_image(&raw, format, &mut builder) {
                        Ok(data) => {
                            let data: Arc<[u8]> = Arc::from(data);
                            let mut sent = false;
                            for p in hub.peers() {
                                sent |= p.offer(channel, Class::Image, log_time, &data);
                            }
                            if sent {
                                // Relaxed: counts read for a report, no data behind them.
                                s.images.fetch_add(1, Ordering::Relaxed);
                                s.bytes.fetch_add(data.len() as u64, Ordering::Relaxed);
                            }
                        }
                        Err(e) => {
                            // Relaxed: counts and a once-only flag, no data behind them.
                            s.failed.fetch_add(1, Ordering::Relaxed);
                            if !s.told_failure.swap(true, Ordering::Relaxed) {
                                super::log_line(format!(
                                    "a camera image cannot be compressed ({e}); such images are counted, not sent"
                                ));
                            }
                        }
                    }
                }
            })?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Hands over the raw image `raw` of server channel `channel`, replacing the one of
    /// that channel still waiting.
    pub fn put(&self, channel: u64, log_time: u64, raw: Arc<[u8]>) {
        let mut w = lock(&self.shared.waiting);
        match w.newest.insert(channel, (log_time, raw)) {
            // Relaxed: a count, no data behind it.
            Some(_) => _ = self.shared.replaced.fetch_add(1, Ordering::Relaxed),
            None => w.order.push_back(channel),
        }
        drop(w);
        self.shared.wake.notify_one();
    }

    pub fn counts(&self) -> Compressed {
        // Relaxed: counts read for a report, no data behind them.
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let s = &self.shared;
        Compressed {
            images: get(&s.images),
            bytes: get(&s.bytes),
            replaced: get(&s.replaced),
            failed: get(&s.failed),
        }
    }

    /// Stops the encoder: the image it is compressing is its last. Waits for it half a
    /// second at most (an image takes milliseconds); after that it ends with the process.
    pub fn stop(&mut self) {
        lock(&self.shared.waiting).stop = true;
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let deadline = Instant::now() + Duration::from_millis(500);
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            if t.is_finished() {
                // Only waits for the thread's end: a panic in it was printed when it
                // happened.
                let _ = t.join();
            }
        }
    }
}

/// The oldest channel's newest image, waiting until there is one; None once stopped.
fn next(s: &CompressQueue) -> Option<(u64, u64, Arc<[u8]>)> {
    let mut w = lock(&s.waiting);
    loop {
        if w.stop {
            return None;
        }
        while let Some(channel) = w.order.pop_front() {
            if let Some((log_time, raw)) = w.newest.remove(&channel) {
                return Some((channel, log_time, raw));
            }
        }
        w = s
            .wake
            .wait(w)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
    }
}

impl Drop for Compressor {
    fn drop(&mut self) {
        self.stop();
    }
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor")
            .field("counts", &self.counts())
            .finish_non_exhaustive()
    }
}
