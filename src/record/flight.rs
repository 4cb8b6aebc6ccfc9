//! The window's flight recorder: a named thread with its own mapping runs a [`Capture`]
//! into a [`Rolling`] buffer of the last seconds and, while asked to, into a file. The
//! owner talks to it through a bounded channel and reads its status under a short lock;
//! files are written on threads of their own.

use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TrySendError};

use super::lock;
use super::{Capture, FileSink, Message, Prelude, RecordError, Rolling, RollingLimits};
use crate::attach::Attached;

/// How often a file being recorded ends its chunk (what a crash may lose).
const CHUNK_EVERY_NS: u64 = 1_000_000_000;
/// How often the status is brought up to date.
const STATUS_EVERY_NS: u64 = 100_000_000;

/// Something the flight recorder did, for the status bar.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    pub text: String,
    pub error: bool,
    /// The file written, when one was.
    pub path: Option<PathBuf>,
}

/// A file being recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordingStatus {
    pub path: PathBuf,
    pub bytes: u64,
    pub frames: u64,
}

/// What the flight recorder holds now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FlightStatus {
    pub rolling_bytes: u64,
    pub rolling_frames: u64,
    pub rolling_seconds: f64,
    pub recording: Option<RecordingStatus>,
    /// `frame_seq` of the first captured frame with a NaN or an infinity.
    pub first_nonfinite: Option<u64>,
    /// Frames let pass while keeping to the CPU budget on a busy machine.
    pub frames_skipped: u64,
    /// The machine is busy and the flight recorder keeps to its CPU budget.
    pub yielding: bool,
}

enum Command {
    Limits(RollingLimits),
    BusyBudget(Option<f32>),
    /// Write the rolling buffer into a new file in this folder; `nonfinite`: only if no
    /// file was saved for a NaN or infinity yet.
    Save {
        dir: PathBuf,
        reason: String,
        nonfinite: bool,
    },
    StartRecording {
        dir: PathBuf,
    },
    StopRecording,
}

/// Where a file's bytes go.
pub trait Output: std::io::Write + std::io::Seek + Send {}
impl<T: std::io::Write + std::io::Seek + Send> Output for T {}

/// Creates the file at a path.
pub type CreateFile = fn(&Path) -> std::io::Result<Box<dyn Output>>;

/// `std::fs::File::create`.
pub fn create_file(path: &Path) -> std::io::Result<Box<dyn Output>> {
    Ok(Box::new(std::fs::File::create(path)?))
}

/// The flight recorder of one attachment.
pub struct Flight {
    commands: Sender<Command>,
    status: Arc<Mutex<FlightStatus>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for Flight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flight").finish_non_exhaustive()
    }
}

/// Where the flight recorder writes its files and how it tells of them.
#[derive(Clone)]
pub struct FlightConfig {
    /// Save the rolling buffer once by itself when the first NaN or infinity is captured,
    /// into this folder.
    pub save_on_nonfinite: Option<PathBuf>,
    /// Notes of files written and errors; sends never block (a full channel drops them).
    pub notes: Sender<Note>,
    pub waker: Arc<dyn Fn() + Send + Sync>,
    /// Creates a file to write ([`create_file`]; tests give a failing one).
    pub create: CreateFile,
}

impl std::fmt::Debug for FlightConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightConfig")
            .field("save_on_nonfinite", &self.save_on_nonfinite)
            .finish_non_exhaustive()
    }
}

impl Flight {
    /// Maps `attached` again and starts the thread recording `envs` into a rolling
    /// buffer with `limits`.
    pub fn start(
        attached: &Attached,
        envs: Vec<u32>,
        limits: RollingLimits,
        config: FlightConfig,
    ) -> Result<Self, String> {
        let mapped = attached.reopen().map_err(|e| e.to_string())?;
        let label = attached.label();
        // Images when at least a hundred copies of the recorded envs' images fit their
        // quarter of the budget.
        let images = Capture::image_region_bytes(&mapped, envs.len()).saturating_mul(400)
            <= limits.max_bytes;
        let mut capture = Capture::new(mapped, envs).map_err(|e| e.to_string())?;
        if images {
            capture = capture.with_images();
        }
        let (commands, rx) = crossbeam_channel::bounded(16);
        let status = Arc::new(Mutex::new(FlightStatus::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            capture,
            rolling: Rolling::new(limits),
            recording: None,
            label,
            rx,
            status: Arc::clone(&status),
            stop: Arc::clone(&stop),
            config,
            saved_nonfinite: false,
        };
        let thread = std::thread::Builder::new()
            .name("lrbc-flight".into())
            .spawn(move || worker.run())
            .map_err(|e| e.to_string())?;
        Ok(Self {
            commands,
            status,
            stop,
            thread: Some(thread),
        })
    }

    /// The status now (a short lock).
    pub fn status(&self) -> FlightStatus {
        lock(&self.status).clone()
    }

    fn send(&self, c: Command) -> Result<(), String> {
        self.commands.try_send(c).map_err(|e| match e {
            TrySendError::Full(_) => "the flight recorder is busy; try again".to_string(),
            TrySendError::Disconnected(_) => "the flight recorder has stopped".to_string(),
        })
    }

    pub fn set_limits(&self, limits: RollingLimits) -> Result<(), String> {
        self.send(Command::Limits(limits))
    }

    /// While the machine has no spare CPU, the flight recorder keeps its CPU time within
    /// this percent of one core and lets frames pass (counted as skipped); None (the
    /// default): it follows every frame it can.
    pub fn set_busy_budget(&self, percent_of_a_core: Option<f32>) -> Result<(), String> {
        self.send(Command::BusyBudget(percent_of_a_core))
    }

    /// Writes the rolling buffer into a new file in `dir` (on a thread of its own); a
    /// [`Note`] tells where it went.
    pub fn save(&self, dir: &Path, reason: &str) -> Result<(), String> {
        self.send(Command::Save {
            dir: dir.to_path_buf(),
            reason: reason.to_string(),
            nonfinite: false,
        })
    }

    /// Like [`Flight::save`], once for the first NaN or infinity (whether the capture or
    /// the owner saw it first).
    pub fn save_nonfinite(&self, dir: &Path, reason: &str) -> Result<(), String> {
        self.send(Command::Save {
            dir: dir.to_path_buf(),
            reason: reason.to_string(),
            nonfinite: true,
        })
    }

    /// Starts recording from now into a new file in `dir`.
    pub fn start_recording(&self, dir: &Path) -> Result<(), String> {
        self.send(Command::StartRecording {
            dir: dir.to_path_buf(),
        })
    }

    pub fn stop_recording(&self) -> Result<(), String> {
        self.send(Command::StopRecording)
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        // Relaxed: a flag with no data behind it (paired with the load in `Worker::run`).
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Recording {
    file: FileSink<BufWriter<Box<dyn Output>>>,
    path: PathBuf,
    last_chunk_ns: u64,
}

struct Worker {
    capture: Capture,
    rolling: Rolling,
    recording: Option<Recording>,
    label: String,
    rx: Receiver<Command>,
    status: Arc<Mutex<FlightStatus>>,
    stop: Arc<AtomicBool>,
    config: FlightConfig,
    saved_nonfinite: bool,
}

impl Worker {
    fn run(mut self) {
        // An observer: it runs in the time the engine and trainer leave over.
        crate::platform::lower_thread_priority(19);
        let mut messages: Vec<Message> = Vec::new();
        let mut last_status = 0u64;
        // Relaxed: see `Flight::drop`.
        while !self.stop.load(Ordering::Relaxed) {
            while let Ok(c) = self.rx.try_recv() {
                self.command(c);
            }
            messages.clear();
            self.capture.poll(&mut messages);
            let now = crate::clock::monotonic_now_ns();
            for m in messages.drain(..) {
                self.record(&m);
                self.rolling.push(m);
            }
            self.end_chunk(now);
            if let (Some(seq), Some(dir), false) = (
                self.capture.first_nonfinite(),
                self.config.save_on_nonfinite.clone(),
                self.saved_nonfinite,
            ) {
                self.saved_nonfinite = true;
                self.save(dir, format!("NaN/Inf at frame {seq}"));
            }
            if now.saturating_sub(last_status) >= STATUS_EVERY_NS {
                last_status = now;
                self.publish();
            }
            // Woken by the follower's frames; the rings and commands are read at least
            // every few milliseconds.
            self.capture.wait(Duration::from_millis(5));
        }
        // Commands sent before the stop (a save as the segment goes) are carried out.
        while let Ok(c) = self.rx.try_recv() {
            self.command(c);
        }
        if let Some(r) = self.recording.take() {
            self.finish_recording(r);
        }
    }

    fn publish(&self) {
        let mut s = lock(&self.status);
        s.rolling_bytes = self.rolling.bytes();
        s.rolling_frames = self.rolling.frames();
        s.rolling_seconds = self.rolling.seconds();
        s.first_nonfinite = self.capture.first_nonfinite();
        s.frames_skipped = self.capture.counts().frames_skipped;
        s.yielding = self.capture.yielding();
        s.recording = self.recording.as_ref().map(|r| RecordingStatus {
            path: r.path.clone(),
            bytes: r.file.bytes_written(),
            frames: r.file.frames(),
        });
    }

    fn note(&self, text: String, error: bool, path: Option<PathBuf>) {
        let _ = self.config.notes.try_send(Note { text, error, path });
        (self.config.waker)();
    }

    fn command(&mut self, c: Command) {
        match c {
            Command::Limits(l) => self.rolling.set_limits(l),
            Command::BusyBudget(p) => self.capture.set_busy_budget(p),
            Command::Save {
                dir,
                reason,
                nonfinite,
            } => {
                if nonfinite {
                    if self.saved_nonfinite {
                        return;
                    }
                    self.saved_nonfinite = true;
                }
                self.save(dir, reason);
            }
            Command::StartRecording { dir } => {
                if self.recording.is_some() {
                    return;
                }
                match self.open_recording(&dir) {
                    Ok(r) => {
                        let text = format!("recording into {}", r.path.display());
                        self.recording = Some(r);
                        self.note(text, false, None);
                    }
                    Err(e) => self.note(format!("cannot record: {e}"), true, None),
                }
                self.publish();
            }
            Command::StopRecording => {
                if let Some(r) = self.recording.take() {
                    self.finish_recording(r);
                }
                self.publish();
            }
        }
    }

    fn open_recording(&self, dir: &Path) -> Result<Recording, String> {
        let path = new_file_path(dir, &self.label)?;
        let file = (self.config.create)(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let file = FileSink::new(BufWriter::new(file), self.capture.prelude())
            .map_err(|e| format!("writing {}: {}", path.display(), e.cause()))?;
        Ok(Recording {
            file,
            path,
            last_chunk_ns: crate::clock::monotonic_now_ns(),
        })
    }

    fn record(&mut self, m: &Message) {
        let Some(r) = &mut self.recording else {
            return;
        };
        let written = r
            .file
            .sync(self.capture.prelude())
            .and_then(|()| r.file.write(m));
        if let Err(e) = written {
            self.fail_recording(&e);
        }
    }

    fn end_chunk(&mut self, now: u64) {
        let Some(r) = &mut self.recording else {
            return;
        };
        if now.saturating_sub(r.last_chunk_ns) < CHUNK_EVERY_NS {
            return;
        }
        r.last_chunk_ns = now;
        if let Err(e) = r.file.end_chunk() {
            self.fail_recording(&e);
        }
    }

    /// A write failed: the recording stops, the rolling buffer goes on.
    fn fail_recording(&mut self, e: &RecordError) {
        if let Some(r) = self.recording.take() {
            let text = format!(
                "recording stopped: writing {}: {}",
                r.path.display(),
                e.cause()
            );
            // What can still be written is; the error above is what the user needs.
            drop(r);
            self.note(text, true, None);
            self.publish();
        }
    }

    fn finish_recording(&self, r: Recording) {
        let frames = r.file.frames();
        let counts = self.capture.counts();
        let path = r.path;
        match r.file.finish(&counts) {
            Ok(_) => self.note(
                format!("recorded {frames} frames into {}", path.display()),
                false,
                Some(path),
            ),
            Err(e) => self.note(
                format!("writing {}: {}", path.display(), e.cause()),
                true,
                None,
            ),
        }
    }

    /// Writes the rolling buffer into a new file in `dir` on a thread of its own.
    fn save(&mut self, dir: PathBuf, reason: String) {
        let copy = self.rolling.copy(self.capture.counts());
        let prelude: Prelude = self.capture.prelude().clone();
        let label = self.label.clone();
        let create = self.config.create;
        let notes = self.config.notes.clone();
        let waker = Arc::clone(&self.config.waker);
        let spawned = std::thread::Builder::new()
            .name("lrbc-flight-save".into())
            .spawn(move || {
                let note = match write_copy(&dir, &label, &copy, &prelude, create) {
                    Ok(path) => Note {
                        text: format!(
                            "{reason}: saved the last {:.0} s ({} frames) to {}",
                            seconds_of(&copy.messages),
                            copy.counts.frames_recorded,
                            path.display()
                        ),
                        error: false,
                        path: Some(path),
                    },
                    Err(e) => Note {
                        text: format!("{reason}: {e}"),
                        error: true,
                        path: None,
                    },
                };
                let _ = notes.try_send(note);
                waker();
            });
        if let Err(e) = spawned {
            self.note(format!("cannot save: {e}"), true, None);
        }
    }
}

fn seconds_of(m: &[Message]) -> f64 {
    match (m.first(), m.last()) {
        (Some(a), Some(b)) => b.log_time.saturating_sub(a.log_time) as f64 / 1e9,
        _ => 0.0,
    }
}

fn write_copy(
    dir: &Path,
    label: &str,
    copy: &super::RollingCopy,
    prelude: &Prelude,
    create: CreateFile,
) -> Result<PathBuf, String> {
    let path = new_file_path(dir, label)?;
    let file = create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    copy.write(prelude, BufWriter::new(file))
        .map_err(|e| format!("writing {}: {}", path.display(), e.cause()))?;
    Ok(path)
}

/// `DIR/lrbc-<segment>-<UTC time>.mcap`, creating `DIR`; a number is added when the
/// name is taken.
pub fn new_file_path(dir: &Path, label: &str) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let segment: String = label
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(label)
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let stamp = utc_stamp(std::time::SystemTime::now());
    let base = format!("lrbc-{segment}-{stamp}");
    let mut path = dir.join(format!("{base}.mcap"));
    let mut n = 1;
    while path.exists() {
        n += 1;
        path = dir.join(format!("{base}-{n}.mcap"));
    }
    Ok(path)
}

/// `YYYYMMDDTHHMMSSZ` of `t`.
pub fn utc_stamp(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Days since 1970-01-01 to a civil date (proleptic Gregorian).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attach::{Target, attach};
    use crate::layout::LayoutChoice;
    use crate::sim::engine::{Engine, EngineConfig};

    const DEADLINE: Duration = Duration::from_secs(30);

    fn next_note(rx: &Receiver<Note>) -> Note {
        rx.recv_timeout(DEADLINE)
            .expect("a note within the deadline")
    }

    /// A disk that fills up: the first 256 KiB are written (the schemas and metadata
    /// take about 70), then every write fails.
    #[derive(Default)]
    struct FillsUp {
        pos: u64,
        len: u64,
    }

    impl std::io::Write for FillsUp {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.pos + buf.len() as u64 > 256 << 10 {
                return Err(std::io::Error::other("the disk is full"));
            }
            self.pos += buf.len() as u64;
            self.len = self.len.max(self.pos);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl std::io::Seek for FillsUp {
        fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
            self.pos = match to {
                std::io::SeekFrom::Start(p) => p,
                std::io::SeekFrom::End(d) => self.len.saturating_add_signed(d),
                std::io::SeekFrom::Current(d) => self.pos.saturating_add_signed(d),
            };
            Ok(self.pos)
        }
    }

    #[test]
    fn a_full_disk_stops_the_recording_with_one_line_and_the_rolling_buffer_goes_on() {
        let mut e = Engine::create(EngineConfig::small(
            crate::testutil::unique_name("flight"),
            crate::layout::plan::PlanLayout::Lrbc { ext: true },
            4,
            64,
            2,
        ))
        .unwrap();
        let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
        let (tx, rx) = crossbeam_channel::bounded(16);
        let dir = std::env::temp_dir().join(crate::testutil::unique_name("flight-full"));
        let flight = Flight::start(
            &a,
            vec![0, 1, 2, 3],
            RollingLimits {
                seconds: 60.0,
                max_bytes: 64 << 20,
            },
            FlightConfig {
                save_on_nonfinite: None,
                notes: tx,
                waker: Arc::new(|| {}),
                create: |_| Ok(Box::new(FillsUp::default())),
            },
        )
        .unwrap();
        flight.start_recording(&dir).unwrap();
        let mut step = 0;
        let mut step_once = |e: &mut Engine| {
            step += 1;
            e.step_once(Some(step));
        };
        // The file opens; writing frames fails before long.
        let opened = next_note(&rx);
        assert!(opened.text.starts_with("recording into "), "{opened:?}");
        let deadline = std::time::Instant::now() + DEADLINE;
        let stopped = loop {
            step_once(&mut e);
            if let Ok(n) = rx.try_recv() {
                break n;
            }
            assert!(std::time::Instant::now() < deadline, "no error note");
            std::thread::sleep(Duration::from_millis(2));
        };
        assert!(stopped.error, "{stopped:?}");
        assert!(
            stopped.text.starts_with("recording stopped: writing ")
                && stopped.text.ends_with(".mcap: the disk is full"),
            "{}",
            stopped.text
        );
        assert!(!stopped.text.contains('\n'));
        // The flight recorder goes on: new frames reach its buffer, a save says why it
        // could not be written.
        let before = flight.status().rolling_frames;
        let deadline = std::time::Instant::now() + DEADLINE;
        while flight.status().rolling_frames <= before {
            assert!(std::time::Instant::now() < deadline, "the buffer stopped");
            step_once(&mut e);
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(flight.status().recording, None);
        flight.save(&dir, "saved on request").unwrap();
        let saved = next_note(&rx);
        assert!(saved.error, "{saved:?}");
        assert!(
            saved.text.starts_with("saved on request: writing ")
                && saved.text.ends_with(": the disk is full"),
            "{}",
            saved.text
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn utc_stamps_are_civil_dates() {
        let at = |s| std::time::UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(utc_stamp(at(0)), "19700101T000000Z");
        assert_eq!(utc_stamp(at(951_782_400)), "20000229T000000Z");
        assert_eq!(utc_stamp(at(1_795_000_000)), "20261118T110640Z");
    }
}
