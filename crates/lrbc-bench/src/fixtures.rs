//! What the benchmarks share: a run of an engine and a client (`start`), and a viewer
//! of a served run that tallies what it receives (`CountingViewer`) on a free loopback port.

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::shared::BenchError;
use lrbc::sync::lock;
use lrbc_remote::view::Connection;
use lrbc_remote::view::wire::ServerMessage;
use lrbc_sim::children::{ChildProcess, start_client, start_engine};
use lrbc_sim::engine::Preset;

/// An engine and (optionally) a client as child processes.
pub(crate) struct Run {
    pub(crate) name: String,
    pub(crate) engine: ChildProcess,
    pub(crate) client: Option<ChildProcess>,
}

pub(crate) fn start(
    preset: Preset,
    client: (Option<f64>, &str),
    client_steps: Option<u64>,
    tag: &str,
) -> Result<Run, BenchError> {
    let (client_hz, policy) = client;
    let name = format!("lrbc-uibench-{}-{tag}", std::process::id());
    let engine = start_engine(&name, preset, &["--force"])?;
    let client = match (client_hz, client_steps) {
        (None, None) => None,
        _ => {
            let mut args = vec!["--policy".to_string(), policy.into()];
            if let Some(hz) = client_hz {
                args.extend(["--hz".into(), hz.to_string()]);
            }
            if let Some(steps) = client_steps {
                args.extend([
                    "--steps".into(),
                    steps.to_string(),
                    "--no-commands".into(),
                    "--json".into(),
                ]);
            }
            let stdout = if client_steps.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            };
            Some(start_client(&name, &args, stdout)?)
        }
    };
    Ok(Run {
        name,
        engine,
        client,
    })
}

/// What a viewer received.
#[derive(Clone, Debug, Default)]
pub(crate) struct ViewerTally {
    pub frames: u64,
    pub bytes: u64,
    pub by_topic: BTreeMap<String, (u64, u64)>,
    /// The engine's stamp (`frame_time_ns`) to arrival, ns, of each frame.
    pub latency_ns: Vec<u64>,
    /// The follower's copy (`sampled_ns`, just after publication) to arrival, ns.
    pub copy_latency_ns: Vec<u64>,
    pub first_seq: Option<u64>,
    pub last_seq: u64,
}

/// A client on its own thread that subscribes to every channel and counts what comes;
/// `stalled` stops it reading (its connection stays open).
pub(crate) struct CountingViewer {
    pub tally: Arc<Mutex<ViewerTally>>,
    pub stalled: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl CountingViewer {
    pub fn start(url: &str) -> Result<Self, BenchError> {
        let mut c = Connection::connect(url, Duration::from_secs(10))
            .map_err(|e| BenchError::Other(e.to_string()))?;
        let tally = Arc::new(Mutex::new(ViewerTally::default()));
        let stalled = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, s, st) = (Arc::clone(&tally), Arc::clone(&stalled), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("bench-viewer".into())
            .spawn(move || {
                let mut subscribed = std::collections::BTreeSet::new();
                // Relaxed: flags with no data behind them.
                while !st.load(Ordering::Relaxed) {
                    if s.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                        continue;
                    }
                    let new: Vec<u64> = (c.channels.keys())
                        .filter(|id| !subscribed.contains(*id))
                        .copied()
                        .collect();
                    if !new.is_empty() {
                        subscribed.extend(new.iter().copied());
                        if c.subscribe(&new).is_err() {
                            return;
                        }
                    }
                    let m = match c.next(Duration::from_millis(50)) {
                        Ok(Some(m)) => m,
                        Ok(None) => continue,
                        Err(_) => return,
                    };
                    let ServerMessage::MessageData {
                        subscription, data, ..
                    } = m
                    else {
                        continue;
                    };
                    let now = lrbc::clock::monotonic_now_ns();
                    let topic = c
                        .channel_of(subscription)
                        .map_or_else(String::new, |ch| ch.topic.clone());
                    let mut t = lock(&t);
                    t.bytes += data.len() as u64;
                    let e = t.by_topic.entry(topic.clone()).or_default();
                    e.0 += 1;
                    e.1 += data.len() as u64;
                    if topic == lrbc_recording::format::FRAME_TOPIC
                        && let Ok(f) = lrbc::rpc::recording_fb::root_as_frame(&data)
                    {
                        t.frames += 1;
                        t.first_seq.get_or_insert(f.frame_seq());
                        t.last_seq = f.frame_seq();
                        if f.frame_time_ns() != 0 {
                            t.latency_ns.push(now.saturating_sub(f.frame_time_ns()));
                        }
                        t.copy_latency_ns.push(now.saturating_sub(f.sampled_ns()));
                    }
                }
            })
            .map_err(|e| BenchError::Other(format!("cannot start a viewer: {e}")))?;
        Ok(Self {
            tally,
            stalled,
            stop,
            thread: Some(thread),
        })
    }

    /// What came so far, and starts counting again.
    pub fn take(&self) -> ViewerTally {
        std::mem::take(&mut *lock(&self.tally))
    }
}

impl Drop for CountingViewer {
    fn drop(&mut self) {
        // Relaxed: a flag with no data behind it.
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            // Only waits for the thread's end: a panic in it was printed when it happened.
            let _ = t.join();
        }
    }
}

/// A free loopback port now.
pub(crate) fn free_port() -> Result<u16, BenchError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| BenchError::Other(format!("no free port: {e}")))
}

/// This program (`lrbc-bench`), for the processes that are its own commands (the
/// observers' headless app, the link's viewer).
pub(crate) fn this_program() -> Result<std::path::PathBuf, BenchError> {
    std::env::current_exe().map_err(|e| BenchError::Other(format!("cannot find this program: {e}")))
}
