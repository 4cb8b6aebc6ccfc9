//! The control lease on a thread of its own: [`ControlWorker`], a named thread that
//! holds the lease (claimed on first use) and makes control calls for a window without
//! blocking it.
//!
//! It lives here, with the other threads over a live segment, because both of its
//! users sit above this crate: the app's session (a live source) and `lrbc-remote`'s
//! viewer (whose connection answers the same requests in the same state). The lease
//! itself, the one write of the contract (spec 7), is `lrbc::control`'s.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded};

use lrbc::attach::{Attached, Target, attach};
use lrbc::control::Lease;
use lrbc::layout::LayoutChoice;
use lrbc::rpc::tree::NodeValue;
use lrbc::sync::lock;

/// A request for the control worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlRequest {
    SetEnabled { service: u8, enabled: bool },
    Status,
}

/// One service as `GetServiceStatus` reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceRow {
    pub service: String,
    pub enabled: bool,
    pub requests: u64,
    pub errors: u64,
}

/// What the control worker reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControlState {
    pub busy: bool,
    /// The last response, one line.
    pub last: Option<String>,
    pub last_error: Option<String>,
    pub statuses: Vec<ServiceRow>,
    /// This process holds the lease.
    pub holding: bool,
}

/// Why a control call failed, as one line.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Attach(#[from] lrbc::attach::AttachError),
    /// The lease could not be claimed, or the call went wrong on the rings.
    #[error(transparent)]
    Control(#[from] lrbc::control::ControlError),
    #[error("{method}: the engine refused: {error}")]
    Refused { method: String, error: String },
    /// A served run's call, as its server or the link tells it.
    #[error("{0}")]
    Remote(String),
}

impl ControlState {
    /// A call's outcome: its line, or why it failed (the line before stays).
    pub fn answered(&mut self, result: Result<String, CallError>) {
        match result {
            Ok(line) => {
                self.last = Some(line);
                self.last_error = None;
            }
            Err(e) => self.last_error = Some(e.to_string()),
        }
    }
}

/// A thread that owns the control lease (claimed on first use) and makes calls
/// without blocking the UI. Dropping it releases the lease.
#[derive(Debug)]
pub struct ControlWorker {
    requests: Sender<ControlRequest>,
    pub state: Arc<Mutex<ControlState>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ControlWorker {
    pub fn start(
        target: &Target,
        choice: LayoutChoice,
        waker: Arc<dyn Fn() + Send + Sync>,
    ) -> std::io::Result<Self> {
        let (tx, rx): (Sender<ControlRequest>, Receiver<ControlRequest>) = bounded(16);
        let state = Arc::new(Mutex::new(ControlState::default()));
        let (target, st) = (target.clone(), Arc::clone(&state));
        let thread = std::thread::Builder::new()
            .name("lrbc-control".into())
            .spawn(move || {
                let mut attached: Option<Attached> = None;
                let mut lease: Option<Lease> = None;
                loop {
                    let req = match rx.recv_timeout(Duration::from_millis(200)) {
                        Ok(r) => r,
                        Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
                        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
                    };
                    lock(&st).busy = true;
                    waker();
                    let result = (|| -> Result<String, CallError> {
                        let a = match &mut attached {
                            Some(a) => a,
                            None => attached.insert(attach(&target, choice)?),
                        };
                        let l = match &mut lease {
                            Some(l) => l,
                            None => lease.insert(Lease::claim(a)?),
                        };
                        let timeout = Duration::from_secs(3);
                        let (resp, bytes) = match req {
                            ControlRequest::SetEnabled { service, enabled } => {
                                l.set_service_enabled(service, enabled, timeout, None)
                            }
                            ControlRequest::Status => l.service_status(timeout, None),
                        }?;
                        if let Some(e) = &resp.error {
                            return Err(CallError::Refused {
                                method: resp.method_label(),
                                error: e.clone(),
                            });
                        }
                        let fields = resp.tree.to_json(&bytes);
                        if let Some(rows) = statuses_of(&fields) {
                            lock(&st).statuses = rows;
                        }
                        let enabled = resp
                            .tree
                            .nodes
                            .iter()
                            .find(|n| n.name == "enabled")
                            .map(|n| n.value == NodeValue::Bool(true));
                        Ok(match (req, enabled) {
                            (ControlRequest::SetEnabled { service, .. }, Some(e)) => {
                                set_line(service, e)
                            }
                            _ => format!(
                                "{}: {}",
                                resp.method_label(),
                                resp.tree.summary(&bytes, 0, 160)
                            ),
                        })
                    })();
                    let mut s = lock(&st);
                    s.busy = false;
                    s.holding = lease.is_some();
                    s.answered(result);
                    drop(s);
                    waker();
                }
                // The lease is released here, when `lease` drops.
            })?;
        Ok(Self {
            requests: tx,
            state,
            thread: Some(thread),
        })
    }

    /// A worker whose requests another thread takes from `requests` and answers in
    /// `state` (a remote viewer's connection, which calls the server's services).
    pub fn elsewhere(requests: Sender<ControlRequest>, state: Arc<Mutex<ControlState>>) -> Self {
        Self {
            requests,
            state,
            thread: None,
        }
    }

    /// Queues a request; false when the queue is full.
    pub fn send(&self, r: ControlRequest) -> bool {
        self.requests.try_send(r).is_ok()
    }

    pub fn state(&self) -> ControlState {
        lock(&self.state).clone()
    }
}

/// The services' rows of a `GetServiceStatus` response's fields (as JSON).
pub fn statuses_of(fields: &serde_json::Value) -> Option<Vec<ServiceRow>> {
    let list = fields["payload"]["GetServiceStatusResp"]["services"].as_array()?;
    Some(
        list.iter()
            .map(|s| ServiceRow {
                service: s["service"].as_str().unwrap_or("?").to_string(),
                enabled: s["enabled"].as_bool().unwrap_or(false),
                requests: s["requests"].as_u64().unwrap_or(0),
                errors: s["errors"].as_u64().unwrap_or(0),
            })
            .collect(),
    )
}

/// The line the RPC panel shows after a service was set.
pub fn set_line(service: u8, enabled: bool) -> String {
    format!(
        "SetServiceEnabled: {} is now {}",
        lrbc::rpc::services::label(service),
        if enabled { "enabled" } else { "disabled" }
    )
}

impl Drop for ControlWorker {
    fn drop(&mut self) {
        // Closing the channel ends the thread, which releases the lease.
        let (dead, _) = bounded(1);
        self.requests = dead;
        if let Some(t) = self.thread.take() {
            // Only waits for the thread's end: a panic in it was printed when it happened.
            let _ = t.join();
        }
    }
}
