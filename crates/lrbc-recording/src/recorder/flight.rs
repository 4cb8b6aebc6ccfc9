//! The window's flight recorder: a named thread with its own mapping runs a [`Capture`]
//! into a [`Rolling`] buffer of the last seconds and, while asked to, into a file. The
//! owner talks to it through a bounded channel and reads its status under a short lock;
//! files are written on threads of their own (`worker`: the thread; `files`: the
//! files' names).

mod files;
mod worker;

pub use files::{FlightFileError, new_file_path, utc_stamp};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Sender, TrySendError};

use super::lock;
use super::{Capture, Counts, Message, Prelude, Rolling, RollingLimits};
use lrbc::attach::Attached;
use lrbc_live::detect::{Event, EventKind};
use worker::FlightThread;

/// A save for an event waits this long after it, so that the file holds what followed.
pub const AFTER_EVENT: std::time::Duration = std::time::Duration::from_secs(2);

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
    /// The first event of the kinds that make it save, once found.
    pub first_event: Option<Event>,
    /// Frames let pass while keeping to the CPU budget on a busy machine.
    pub frames_skipped: u64,
    /// The machine is busy and the flight recorder keeps to its CPU budget.
    pub yielding: bool,
}

enum Command {
    Limits(RollingLimits),
    BusyBudget(Option<f32>),
    /// Write the rolling buffer into a new file in this folder.
    Save {
        dir: PathBuf,
        reason: String,
    },
    StartRecording {
        dir: PathBuf,
    },
    StopRecording,
}

/// What the flight recorder records: a [`Capture`] of a segment mapped here, or the
/// messages of a run served elsewhere as they arrive.
pub trait FlightSource: Send {
    /// The schemas, channels and metadata so far (channels are only ever added).
    fn prelude(&self) -> &Prelude;
    /// Appends the messages that came since the last call to `out`.
    fn poll(&mut self, out: &mut Vec<Message>);
    /// Waits up to `timeout` for a message (at once if one is waiting).
    fn wait(&mut self, timeout: std::time::Duration);
    /// What was kept and lost, for the file's `lrbc.counts`.
    fn counts(&self) -> Counts;
    /// The first event found of one of `kinds`, in the form it was found, if the
    /// source looks for events.
    fn first_event(&self, _kinds: &[EventKind]) -> Option<Event> {
        None
    }
    /// The source's CPU budget on a busy machine, if it has one.
    fn set_busy_budget(&mut self, _percent_of_a_core: Option<f32>) {}
    /// True while the source keeps to its budget on a busy machine.
    fn yielding(&self) -> bool {
        false
    }
    /// The segment's state as of now, when the source reads it (a save as the segment
    /// goes keeps the record that says how).
    fn poll_state_now(&mut self, _out: &mut Vec<Message>) {}
}

impl FlightSource for Capture {
    fn prelude(&self) -> &Prelude {
        Capture::prelude(self)
    }
    fn poll(&mut self, out: &mut Vec<Message>) {
        Capture::poll(self, out);
    }
    fn wait(&mut self, timeout: std::time::Duration) {
        Capture::wait(self, timeout);
    }
    fn counts(&self) -> Counts {
        Capture::counts(self)
    }
    fn first_event(&self, kinds: &[EventKind]) -> Option<Event> {
        kinds
            .iter()
            .filter_map(|k| self.first_events().get(k))
            .min_by_key(|e| e.id)
            .cloned()
    }
    fn set_busy_budget(&mut self, percent_of_a_core: Option<f32>) {
        Capture::set_busy_budget(self, percent_of_a_core);
    }
    fn yielding(&self) -> bool {
        Capture::yielding(self)
    }
    fn poll_state_now(&mut self, out: &mut Vec<Message>) {
        Capture::poll_state_now(self, out);
    }
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

/// Why the flight recorder could not start or take a command, as one line.
#[derive(Debug, thiserror::Error)]
pub enum FlightError {
    #[error(transparent)]
    Attach(#[from] lrbc::attach::AttachError),
    #[error(transparent)]
    Capture(#[from] super::RecordError),
    #[error("cannot start the flight recorder's thread: {0}")]
    Thread(std::io::Error),
    #[error("the flight recorder is busy; try again")]
    Busy,
    #[error("the flight recorder has stopped")]
    Stopped,
    #[error("the flight recorder is not running")]
    NotRunning,
    /// Neither a live segment nor a served run to record.
    #[error("nothing to record")]
    NothingToRecord,
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
    /// Save the seconds around the first event of these kinds by themselves, once, into
    /// this folder: the rolling buffer [`AFTER_EVENT`] after the event.
    pub save_on_event: Option<(PathBuf, Vec<EventKind>)>,
    /// Notes of files written and errors; sends never block (a full channel drops them).
    pub notes: Sender<Note>,
    pub waker: Arc<dyn Fn() + Send + Sync>,
    /// Creates a file to write ([`create_file`]; tests give a failing one).
    pub create: CreateFile,
}

impl std::fmt::Debug for FlightConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FlightConfig")
            .field("save_on_event", &self.save_on_event)
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
    ) -> Result<Self, FlightError> {
        let mapped = attached.reopen()?;
        let label = attached.label();
        // Images when at least a hundred copies of the recorded envs' images fit their
        // quarter of the budget.
        let images = Capture::image_region_bytes(&mapped, envs.len()).saturating_mul(400)
            <= limits.max_bytes;
        let mut capture = Capture::new(mapped, envs)?;
        if images {
            capture = capture.with_images();
        }
        Self::start_from(Box::new(capture), label, limits, config)
    }

    /// Starts the thread recording what `source` gives into a rolling buffer with
    /// `limits`; its files are named after `label`.
    pub fn start_from(
        source: Box<dyn FlightSource>,
        label: String,
        limits: RollingLimits,
        config: FlightConfig,
    ) -> Result<Self, FlightError> {
        let (commands, rx) = crossbeam_channel::bounded(16);
        let status = Arc::new(Mutex::new(FlightStatus::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let worker = FlightThread {
            capture: source,
            rolling: Rolling::new(limits),
            recording: None,
            label,
            rx,
            status: Arc::clone(&status),
            stop: Arc::clone(&stop),
            config,
            event_save: worker::EventSave::Waiting,
        };
        let thread = std::thread::Builder::new()
            .name("lrbc-flight".into())
            .spawn(move || worker.run())
            .map_err(FlightError::Thread)?;
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

    fn send(&self, c: Command) -> Result<(), FlightError> {
        self.commands.try_send(c).map_err(|e| match e {
            TrySendError::Full(_) => FlightError::Busy,
            TrySendError::Disconnected(_) => FlightError::Stopped,
        })
    }

    pub fn set_limits(&self, limits: RollingLimits) -> Result<(), FlightError> {
        self.send(Command::Limits(limits))
    }

    /// While the machine has no spare CPU, the flight recorder keeps its CPU time within
    /// this percent of one core and lets frames pass (counted as skipped); None (the
    /// default): it follows every frame it can.
    pub fn set_busy_budget(&self, percent_of_a_core: Option<f32>) -> Result<(), FlightError> {
        self.send(Command::BusyBudget(percent_of_a_core))
    }

    /// Writes the rolling buffer into a new file in `dir` (on a thread of its own); a
    /// [`Note`] tells where it went.
    pub fn save(&self, dir: &Path, reason: &str) -> Result<(), FlightError> {
        self.send(Command::Save {
            dir: dir.to_path_buf(),
            reason: reason.to_string(),
        })
    }

    /// Starts recording from now into a new file in `dir`.
    pub fn start_recording(&self, dir: &Path) -> Result<(), FlightError> {
        self.send(Command::StartRecording {
            dir: dir.to_path_buf(),
        })
    }

    pub fn stop_recording(&self) -> Result<(), FlightError> {
        self.send(Command::StopRecording)
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        // Relaxed: a flag with no data behind it (paired with the load in `FlightThread::run`).
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            // Only waits for the thread's end: a panic in it was printed when it happened.
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests;
