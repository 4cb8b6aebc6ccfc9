//! The independent fault-writing peer (`tests/py/lrbc_fault_peer.py`) as a child
//! process: one Python process that plays the engine and the trainer of a segment of its
//! own and writes the faults a test asks for (non-finite values, done bursts, stalls,
//! failed, unanswered and malformed ring entries), optionally as an on-policy trainer's
//! rollout/update loop (`--rollout N --update SECS`) and with episodes that end by a
//! time limit only (`--time-limit L`).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde_json::Value;

use super::{DEADLINE, line_channel, python_path, unique_name};

pub fn fault_peer_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/lrbc_fault_peer.py")
}

/// What the peer runs: its command line but the name.
#[derive(Clone, Debug)]
pub struct PeerArgs {
    pub envs: u32,
    pub obs: u32,
    pub act: u32,
    pub steps: u64,
    pub hz: f64,
    /// The `--faults` list (a JSON array).
    pub faults: Value,
    /// `--ring BYTES`; `None`: the peer's default (65536).
    pub ring: Option<u32>,
    /// `--episodes`: its done line lists every episode that ended.
    pub episodes: bool,
    /// `--rollout N --update SECS`: `(N, SECS)`, a pause of SECS s (a policy update)
    /// after every N-th frame but the last; its done line then has a `"rhythm"` object.
    /// `None`: no updates.
    pub rollout: Option<(u64, f64)>,
    /// `--time-limit L`: episodes end only by being truncated in their L-th frame (and
    /// by `done_burst` faults). `None`: the peer's staggered dones and truncations.
    pub time_limit: Option<u64>,
}

impl PeerArgs {
    /// 64 envs × obs 8 × act 4, `steps` steps at `hz`, with `faults`.
    pub fn small(steps: u64, hz: f64, faults: Value) -> Self {
        Self {
            envs: 64,
            obs: 8,
            act: 4,
            steps,
            hz,
            faults,
            ring: None,
            episodes: false,
            rollout: None,
            time_limit: None,
        }
    }

    fn to_args(&self) -> Vec<String> {
        let mut v = vec![
            "--envs".to_string(),
            self.envs.to_string(),
            "--obs".into(),
            self.obs.to_string(),
            "--act".into(),
            self.act.to_string(),
            "--steps".into(),
            self.steps.to_string(),
            "--hz".into(),
            self.hz.to_string(),
            "--faults".into(),
            self.faults.to_string(),
        ];
        if let Some(r) = self.ring {
            v.extend(["--ring".into(), r.to_string()]);
        }
        if self.episodes {
            v.push("--episodes".into());
        }
        if let Some((frames, secs)) = self.rollout {
            v.extend([
                "--rollout".into(),
                frames.to_string(),
                "--update".into(),
                secs.to_string(),
            ]);
        }
        if let Some(l) = self.time_limit {
            v.extend(["--time-limit".into(), l.to_string()]);
        }
        v
    }

    /// How long the run may take: its steps at twice the period, its stalls, its
    /// updates (one per rollout, a bound on the updates made), and the usual deadline on
    /// top.
    fn run_deadline(&self) -> Duration {
        let stalls: f64 = self
            .faults
            .as_array()
            .map(|fs| {
                fs.iter()
                    .filter(|f| f["kind"] == "stall")
                    .filter_map(|f| f["secs"].as_f64())
                    .sum()
            })
            .unwrap_or(0.0);
        let updates = match self.rollout {
            Some((frames, secs)) if secs.is_finite() && secs > 0.0 => {
                self.steps.div_ceil(frames.max(1)) as f64 * secs
            }
            _ => 0.0,
        };
        DEADLINE + Duration::from_secs_f64(2.0 * self.steps as f64 / self.hz + stalls + updates)
    }
}

/// A running peer, its segment created and idle at frame 0 until [`FaultPeer::go`].
/// Dropping it sends `quit`, then kills it if it has not exited, and removes the
/// segment's file in any case.
pub struct FaultPeer {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Arc<Mutex<String>>,
    args: PeerArgs,
    pub name: String,
    /// The peer's pid (the segment's server_pid and client_pid).
    pub pid: u32,
    /// Its ready line.
    pub ready: Value,
}

impl FaultPeer {
    /// Starts the peer on a segment of a unique name and waits for its ready line.
    pub fn start(tag: &str, args: &PeerArgs) -> Self {
        let name = unique_name(tag);
        let mut child = Command::new("python3")
            .arg(fault_peer_script())
            .arg("--name")
            .arg(&name)
            .args(args.to_args())
            .env("PYTHONPATH", python_path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let stdin = child.stdin.take();
        let lines = line_channel(child.stdout.take().expect("stdout"));
        let stderr = Arc::new(Mutex::new(String::new()));
        let errors = line_channel(child.stderr.take().expect("stderr"));
        let sink = Arc::clone(&stderr);
        std::thread::Builder::new()
            .name("test-peer-stderr".into())
            .spawn(move || {
                for line in errors {
                    let mut s = sink
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    s.push_str(&line);
                    s.push('\n');
                }
            })
            .expect("spawn stderr reader");
        let pid = child.id();
        let mut peer = Self {
            child,
            stdin,
            lines,
            stderr,
            args: args.clone(),
            name,
            pid,
            ready: Value::Null,
        };
        let line = peer.line(DEADLINE, "its ready line");
        peer.ready = peer.json(&line, "ready line");
        assert_eq!(
            peer.ready["ready"], true,
            "fault peer: unexpected first line {line}"
        );
        assert_eq!(peer.ready["name"], peer.name.as_str(), "{line}");
        peer
    }

    /// Lets it step.
    pub fn go(&mut self) {
        self.send("go");
    }

    /// Its line after the last step: `{"done": true, "steps", "frame_seq", "faults", ...}`.
    pub fn wait_done(&mut self) -> Value {
        let line = self.line(self.args.run_deadline(), "its done line");
        let v = self.json(&line, "done line");
        assert_eq!(v["done"], true, "fault peer: unexpected line {line}");
        v
    }

    pub fn path(&self) -> PathBuf {
        PathBuf::from("/dev/shm").join(&self.name)
    }

    /// What it wrote on stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("peer stdin");
        let sent = writeln!(stdin, "{command}").and_then(|()| stdin.flush());
        if let Err(e) = sent {
            panic!(
                "fault peer did not take `{command}` ({e}); its stderr:\n{}",
                self.failure_stderr()
            );
        }
    }

    /// The next stdout line within `within`, or a panic showing the peer's stderr.
    fn line(&mut self, within: Duration, what: &str) -> String {
        match self.lines.recv_timeout(within) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => {
                let stderr = self.failure_stderr();
                panic!(
                    "fault peer {}: no {what} within {within:?}; its stderr:\n{stderr}",
                    self.name
                )
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                let stderr = self.failure_stderr();
                panic!(
                    "fault peer {}: exited ({status}) before {what}; its stderr:\n{stderr}",
                    self.name
                )
            }
        }
    }

    fn json(&mut self, line: &str, what: &str) -> Value {
        match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => panic!(
                "fault peer: its {what} is not JSON ({e}): {line}; its stderr:\n{}",
                self.failure_stderr()
            ),
        }
    }

    /// Its stderr, after giving a peer that is exiting a moment to finish writing it.
    fn failure_stderr(&mut self) -> String {
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(50));
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.stderr()
    }
}

impl Drop for FaultPeer {
    fn drop(&mut self) {
        if let Some(mut stdin) = self.stdin.take() {
            let _ = writeln!(stdin, "quit").and_then(|()| stdin.flush());
        }
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(self.path());
    }
}

/// Waits until process `pid` maps the segment `name` (on Linux, a line of
/// `/proc/PID/maps` ending in `/dev/shm/NAME`): a reader started on it has attached.
pub fn wait_until_mapped(pid: u32, name: &str) {
    let suffix = format!("/dev/shm/{name}");
    let deadline = Instant::now() + DEADLINE;
    loop {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
        if maps.lines().any(|l| l.trim_end().ends_with(&suffix)) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "process {pid} did not map /dev/shm/{name} within {DEADLINE:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}
