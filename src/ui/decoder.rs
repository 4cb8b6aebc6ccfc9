//! Image decoding off the UI thread. The panels hand over an envelope under a key (a
//! stream's name, the selected traffic row) and show its image once the worker has
//! decoded it; meanwhile they keep showing the previous one. A newer request for a key
//! replaces one not yet started, so a fast stream never queues: the worker decodes the
//! newest frame of each key, one at a time, and asks the window to repaint when one is
//! ready (at most twenty times a second).

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use lrbc::sync::lock;

/// An image ready to upload, with what the panels say about it.
#[derive(Clone, Debug)]
pub struct DecodedImage {
    pub image: egui::ColorImage,
    /// "camera front (env 3)".
    pub source: String,
    /// "jpeg", "png", "raw", "gray16".
    pub format: &'static str,
    pub frame_number: u32,
}

impl DecodedImage {
    /// "jpeg · frame 12 · 32×24".
    pub fn label(&self) -> String {
        let [w, h] = self.image.size;
        format!("{} · frame {} · {w}×{h}", self.format, self.frame_number)
    }
}

/// A finished decode: the image, or why the payload cannot be shown.
pub type Outcome = Result<DecodedImage, String>;

#[derive(Default)]
struct State {
    /// Per key, the newest request not yet started: its stamp and the bytes.
    pending: BTreeMap<String, (u64, Arc<[u8]>)>,
    /// The key being decoded now.
    running: Option<String>,
    /// Per key, the newest finished decode not yet taken.
    done: BTreeMap<String, (u64, Outcome)>,
    stop: bool,
}

/// The decoder's requests and results, shared with its thread, with its wake-up.
struct DecodeQueue {
    state: Mutex<State>,
    /// Notified when a request arrives, a decode finishes, or the decoder stops.
    changed: Condvar,
}

/// The worker and its queues; dropping it stops the worker.
pub struct ImageDecoder {
    shared: Arc<DecodeQueue>,
    worker: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for ImageDecoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageDecoder").finish_non_exhaustive()
    }
}

impl ImageDecoder {
    /// Starts the worker; `ctx` is asked to repaint after each decode.
    pub fn new(ctx: &egui::Context) -> Self {
        let shared = Arc::new(DecodeQueue {
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let worker = {
            let shared = Arc::clone(&shared);
            let ctx = ctx.clone();
            std::thread::Builder::new()
                .name("image decoder".into())
                .spawn(move || work(&shared, &ctx))
                .ok()
        };
        Self { shared, worker }
    }

    /// Asks for `bytes` (an envelope) to be decoded under `key`, replacing a request for
    /// that key not yet started. Without a worker (the system refused a thread), decodes
    /// here.
    pub fn request(&self, key: &str, stamp: u64, bytes: Arc<[u8]>) {
        let mut s = lock(&self.shared.state);
        if self.worker.is_none() {
            s.done.insert(key.to_string(), (stamp, decode(&bytes)));
            return;
        }
        s.pending.insert(key.to_string(), (stamp, bytes));
        self.shared.changed.notify_all();
    }

    /// The newest finished decode of `key`, once.
    pub fn take(&self, key: &str) -> Option<(u64, Outcome)> {
        lock(&self.shared.state).done.remove(key)
    }

    /// Whether a decode of `key` is asked for or under way.
    pub fn busy(&self, key: &str) -> bool {
        let s = lock(&self.shared.state);
        s.pending.contains_key(key) || s.running.as_deref() == Some(key)
    }

    /// Drops the requests and results of keys that `keep` refuses.
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut s = lock(&self.shared.state);
        s.pending.retain(|k, _| keep(k));
        s.done.retain(|k, _| keep(k));
    }

    /// Waits until nothing is asked for or under way, or `timeout` has passed; whether it
    /// is idle.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        let mut s = lock(&self.shared.state);
        loop {
            if s.pending.is_empty() && s.running.is_none() {
                return true;
            }
            let Some(left) = end.checked_duration_since(Instant::now()) else {
                return false;
            };
            s = self
                .shared
                .changed
                .wait_timeout(s, left)
                .map_or_else(|e| e.into_inner().0, |r| r.0);
        }
    }
}

impl Drop for ImageDecoder {
    fn drop(&mut self) {
        lock(&self.shared.state).stop = true;
        self.shared.changed.notify_all();
        if let Some(w) = self.worker.take() {
            // Only waits for the thread's end: a panic in it was printed when it happened.
            let _ = w.join();
        }
    }
}

/// The window is woken at most this often for decoded images (a pass each).
const WAKE_EVERY: Duration = Duration::from_millis(50);

fn work(shared: &DecodeQueue, ctx: &egui::Context) {
    // When the window was last asked to repaint for a result.
    let mut woken: Option<Instant> = None;
    loop {
        let (key, stamp, bytes) = {
            let mut s = lock(&shared.state);
            loop {
                if s.stop {
                    return;
                }
                if let Some((key, (stamp, bytes))) = s.pending.pop_first() {
                    s.running = Some(key.clone());
                    break (key, stamp, bytes);
                }
                s = shared
                    .changed
                    .wait(s)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        };
        let outcome = decode(&bytes);
        {
            let mut s = lock(&shared.state);
            s.running = None;
            s.done.insert(key, (stamp, outcome));
        }
        shared.changed.notify_all();
        // One pass per wake (a plain request_repaint asks for two), and at most
        // 1 / WAKE_EVERY of them, however many streams come in.
        let now = Instant::now();
        let at = woken.map_or(now, |w| (w + WAKE_EVERY).max(now));
        woken = Some(at);
        ctx.request_repaint_after((at - now).max(Duration::from_millis(1)));
    }
}

fn decode(envelope: &[u8]) -> Outcome {
    match lrbc_recording::format::image_of(envelope) {
        Some(Ok(img)) => Ok(DecodedImage {
            image: egui::ColorImage::from_rgba_unmultiplied(
                [img.rgba.width() as usize, img.rgba.height() as usize],
                img.rgba.as_raw(),
            ),
            source: img.source,
            format: img.format,
            frame_number: img.frame_number,
        }),
        Some(Err(e)) => Err(e.to_string()),
        None => Err("not an image frame".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use lrbc::rpc::fb;

    /// A raw 16×8 RGB camera frame numbered `frame`.
    fn raw_envelope(frame: u32) -> Arc<[u8]> {
        let bytes = lrbc::rpc::build_envelope(7, fb::MethodId::CameraFrame, None, 1, |fbb| {
            let name = fbb.create_string("front");
            let data = fbb.create_vector(&[200u8; 16 * 8 * 3]);
            let f = fb::CameraImageFrame::create(
                fbb,
                &fb::CameraImageFrameArgs {
                    camera_name: Some(name),
                    env_index: 3,
                    width: 16,
                    height: 8,
                    channels: 3,
                    format: fb::ImageFormat::Raw,
                    frame_number: frame,
                    data: Some(data),
                    ..Default::default()
                },
            );
            Some((fb::Payload::CameraImageFrame, f.as_union_value()))
        });
        bytes.into()
    }

    #[test]
    fn a_request_is_decoded_on_the_worker_and_taken_once() {
        let ctx = egui::Context::default();
        let d = ImageDecoder::new(&ctx);
        d.request("front", 7, raw_envelope(5));
        assert!(d.wait_idle(Duration::from_secs(10)), "the worker finishes");
        let (stamp, outcome) = d.take("front").expect("a result");
        assert_eq!(stamp, 7);
        let img = outcome.expect("the frame decodes");
        assert_eq!(img.image.size, [16, 8]);
        assert_eq!(img.frame_number, 5);
        assert!(img.label().contains("frame 5 · 16×8"), "{}", img.label());
        assert!(d.take("front").is_none(), "taken once");
        assert!(!d.busy("front"));
    }

    #[test]
    fn bytes_that_are_not_an_image_say_so() {
        let ctx = egui::Context::default();
        let d = ImageDecoder::new(&ctx);
        d.request("row", 1, Arc::from(&b"not an envelope"[..]));
        assert!(d.wait_idle(Duration::from_secs(10)));
        let (_, outcome) = d.take("row").expect("a result");
        assert!(outcome.is_err());
    }

    #[test]
    fn a_newer_request_replaces_one_not_started_and_forgotten_keys_are_dropped() {
        let ctx = egui::Context::default();
        let d = ImageDecoder::new(&ctx);
        // Hold the state so that the worker cannot start either request.
        {
            let mut s = lock(&d.shared.state);
            s.pending.insert("a".into(), (1, raw_envelope(1)));
            s.pending.insert("a".into(), (2, raw_envelope(2)));
            s.pending.insert("b".into(), (3, raw_envelope(3)));
            assert_eq!(s.pending.len(), 2);
        }
        d.retain(|k| k == "a");
        d.shared.changed.notify_all();
        assert!(d.wait_idle(Duration::from_secs(10)));
        let (stamp, outcome) = d.take("a").expect("a result for a");
        assert_eq!(stamp, 2, "the newest request");
        assert_eq!(outcome.map(|i| i.frame_number).ok(), Some(2));
        assert!(d.take("b").is_none(), "b was forgotten before it ran");
    }
}
