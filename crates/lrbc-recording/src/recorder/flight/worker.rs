//! The flight recorder's thread: polls the capture, feeds the rolling buffer and the
//! file being recorded, carries out the owner's commands and publishes the status.

use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::Receiver;

use super::{
    Command, CreateFile, FlightConfig, FlightFileError, FlightSource, FlightStatus, Note, Output,
    RecordingStatus, new_file_path,
};
use crate::recorder::{FileSink, Message, Prelude, RecordError, Rolling, RollingCopy, lock};
use lrbc_live::detect::{Event, EventKind};

/// How often a file being recorded ends its chunk (what a crash may lose).
const CHUNK_EVERY_NS: u64 = 1_000_000_000;
/// How often the status is brought up to date.
const STATUS_EVERY_NS: u64 = 100_000_000;

/// The file being recorded, while a recording is on.
pub(super) struct FileBeingRecorded {
    file: FileSink<BufWriter<Box<dyn Output>>>,
    path: PathBuf,
    last_chunk_ns: u64,
    /// The capture's counts when the file started: the file's are those since.
    counts_at_start: crate::recorder::Counts,
}

/// What the flight recorder's thread holds.
pub(super) struct FlightThread {
    pub capture: Box<dyn FlightSource>,
    pub rolling: Rolling,
    pub recording: Option<FileBeingRecorded>,
    pub label: String,
    pub rx: Receiver<Command>,
    pub status: Arc<Mutex<FlightStatus>>,
    pub stop: Arc<AtomicBool>,
    pub config: FlightConfig,
    pub event_save: EventSave,
}

/// The save for the first event of the kinds asked for.
#[derive(Debug)]
pub(super) enum EventSave {
    /// No such event yet.
    Waiting,
    /// Found: saved once the seconds after it have come (`due_ns`).
    Due {
        event: Box<Event>,
        due_ns: u64,
    },
    Done,
}

impl FlightThread {
    pub fn run(mut self) {
        // An observer: it runs in the time the engine and trainer leave over.
        lrbc_platform::set_thread_role(lrbc_platform::ThreadRole::Background);
        let mut messages: Vec<Message> = Vec::new();
        let mut last_status = 0u64;
        // Relaxed: see `Flight::drop`.
        while !self.stop.load(Ordering::Relaxed) {
            while let Ok(c) = self.rx.try_recv() {
                self.command(c);
            }
            messages.clear();
            self.capture.poll(&mut messages);
            let now = lrbc::clock::monotonic_now_ns();
            for m in messages.drain(..) {
                self.record(&m);
                self.rolling.push(m);
            }
            self.end_chunk(now);
            self.save_for_event(now);
            if now.saturating_sub(last_status) >= STATUS_EVERY_NS {
                last_status = now;
                self.publish();
            }
            // Woken by the follower's frames; the rings and commands are read at least
            // every few milliseconds (every 20 while the follower yields to a busy
            // machine: a 512 KiB ring is then lapped only by more than 25 MB/s).
            let quiet = if self.capture.yielding() { 20 } else { 5 };
            self.capture.wait(Duration::from_millis(quiet));
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
        s.first_event = match &self.event_save {
            EventSave::Due { event, .. } => Some(Event::clone(event)),
            _ => s.first_event.take(),
        };
        s.frames_skipped = self.capture.counts().frames_skipped;
        s.yielding = self.capture.yielding();
        s.recording = self.recording.as_ref().map(|r| RecordingStatus {
            path: r.path.clone(),
            bytes: r.file.bytes_written(),
            frames: r.file.frames(),
        });
    }

    fn note(&self, text: String, error: bool, path: Option<PathBuf>) {
        // A full queue of notes drops this one: the window reads them at its redraws.
        let _ = self.config.notes.try_send(Note { text, error, path });
        (self.config.waker)();
    }

    fn command(&mut self, c: Command) {
        match c {
            Command::Limits(l) => self.rolling.set_limits(l),
            Command::BusyBudget(p) => self.capture.set_busy_budget(p),
            Command::Save { dir, reason } => self.save(dir, reason, None),
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

    fn open_recording(&self, dir: &Path) -> Result<FileBeingRecorded, FlightFileError> {
        let path = new_file_path(dir, &self.label, None)?;
        let file = (self.config.create)(&path).map_err(|source| FlightFileError::Create {
            path: path.clone(),
            source,
        })?;
        let file = FileSink::new(BufWriter::new(file), self.capture.prelude()).map_err(|e| {
            FlightFileError::Write {
                path: path.clone(),
                cause: e.cause(),
            }
        })?;
        Ok(FileBeingRecorded {
            file,
            path,
            last_chunk_ns: lrbc::clock::monotonic_now_ns(),
            counts_at_start: self.capture.counts(),
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

    fn finish_recording(&self, r: FileBeingRecorded) {
        let frames = r.file.frames();
        let counts = self.capture.counts().since(&r.counts_at_start);
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

    /// The first event of the kinds asked for: once found, the rolling buffer is saved
    /// [`super::AFTER_EVENT`] later (or at once when the capture stops), named after it.
    fn save_for_event(&mut self, now: u64) {
        let Some((dir, kinds)) = &self.config.save_on_event else {
            return;
        };
        if let EventSave::Waiting = self.event_save
            && let Some(event) = self.capture.first_event(kinds)
        {
            let after = u64::try_from(super::AFTER_EVENT.as_nanos()).unwrap_or(u64::MAX);
            self.event_save = EventSave::Due {
                event: Box::new(event),
                due_ns: now.saturating_add(after),
            };
            self.publish();
        }
        let due = matches!(&self.event_save, EventSave::Due { due_ns, .. } if now >= *due_ns);
        // Relaxed: see `Flight::drop`.
        let stopping = self.stop.load(Ordering::Relaxed);
        if due || (stopping && matches!(self.event_save, EventSave::Due { .. })) {
            let dir = dir.clone();
            if let EventSave::Due { event, .. } =
                std::mem::replace(&mut self.event_save, EventSave::Done)
            {
                let reason = event_reason(&event);
                self.save(dir, reason, Some(event_file_tag(&event)));
            }
        }
    }

    /// Writes the rolling buffer into a new file in `dir` on a thread of its own; its
    /// name ends with `tag` when given.
    fn save(&mut self, dir: PathBuf, reason: String, tag: Option<String>) {
        // The state as of now goes in first: a save because the segment was truncated
        // or unlinked keeps the record that says so.
        let mut state = Vec::new();
        self.capture.poll_state_now(&mut state);
        for m in state {
            self.record(&m);
            self.rolling.push(m);
        }
        let copy = self.rolling.copy(self.capture.counts());
        let prelude: Prelude = self.capture.prelude().clone();
        let label = self.label.clone();
        let create = self.config.create;
        let notes = self.config.notes.clone();
        let waker = Arc::clone(&self.config.waker);
        let spawned = std::thread::Builder::new()
            .name("lrbc-flight-save".into())
            .spawn(move || {
                let note = match write_copy(&dir, &label, tag.as_deref(), &copy, &prelude, create) {
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
                // A full queue of notes drops this one: the window reads them at its
                // redraws.
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
    tag: Option<&str>,
    copy: &RollingCopy,
    prelude: &Prelude,
    create: CreateFile,
) -> Result<PathBuf, FlightFileError> {
    let path = new_file_path(dir, label, tag)?;
    let file = create(&path).map_err(|source| FlightFileError::Create {
        path: path.clone(),
        source,
    })?;
    if let Err(e) = copy.write(prelude, BufWriter::new(file)) {
        return Err(FlightFileError::Write {
            path,
            cause: e.cause(),
        });
    }
    Ok(path)
}

/// What a save for an event says: `nonfinite at frame 3000, env 0 observation obs[0]
/// (origin simulator)`.
fn event_reason(e: &Event) -> String {
    let mut s = format!("{} at frame {}", e.kind.as_str(), e.first_frame);
    if let Some(env) = e.env {
        s.push_str(&format!(", env {env}"));
    }
    if e.channel.is_some() {
        s.push(' ');
        s.push_str(&e.channel_text());
    } else if let Some(r) = &e.ring {
        s.push_str(&format!(" on {r}"));
    }
    if let Some(o) = e
        .origin
        .filter(|_| e.kind == EventKind::Nonfinite || e.kind == EventKind::Stall)
    {
        s.push_str(&format!(" (origin {})", o.as_str()));
    }
    s
}

/// The part of a saved file's name that names its event: `nonfinite-f3000-env0`.
fn event_file_tag(e: &Event) -> String {
    let mut s = format!("{}-f{}", e.kind.as_str(), e.first_frame);
    if let Some(env) = e.env {
        s.push_str(&format!("-env{env}"));
    }
    s
}
