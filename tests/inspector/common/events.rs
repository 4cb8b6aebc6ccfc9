//! Support of the detector's tests: `events` as a child process whose stdout and stderr
//! are read with deadlines, its JSON lines kept as every form of each event, the summary
//! line it prints at the end, events as tuples to compare between sources, and the
//! faults of the independent peer (`tests/py/lrbc_fault_peer.py`) a run is given.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde_json::{Value, json};

use super::{
    DEADLINE, Guarded, SimEngine, inspector, interrupt, line_channel, next_line, sim_client,
    temp_file,
};

/// The kinds of event that are about ring entries: their frame is the newest one when
/// a reader of the rings came by, not a frame of their own.
pub const RING_KINDS: [&str; 4] = ["rpc_error", "unanswered", "malformed", "ring_loss"];

/// The forms of events printed by `events --json`, in the order printed.
#[derive(Clone, Debug, Default)]
pub struct Forms {
    pub lines: Vec<Value>,
}

impl Forms {
    /// Parses stdout's lines, each one JSON object.
    pub fn parse(text: &str) -> Self {
        let mut forms = Self::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            forms.push(line);
        }
        forms
    }

    pub fn push(&mut self, line: &str) {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| {
            panic!("events --json printed a line that is not JSON ({e}): {line}")
        });
        assert!(v["id"].is_u64(), "an event without an id: {v}");
        self.lines.push(v);
    }

    /// The last form of each event, by id.
    pub fn last(&self) -> BTreeMap<u64, Value> {
        self.lines
            .iter()
            .map(|v| (v["id"].as_u64().unwrap_or_default(), v.clone()))
            .collect()
    }

    /// Every form of the event `id`, in the order printed.
    pub fn of(&self, id: u64) -> Vec<&Value> {
        self.lines.iter().filter(|v| v["id"] == id).collect()
    }

    /// The last forms of the events of `kind`.
    pub fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.last()
            .into_values()
            .filter(|v| v["kind"] == kind)
            .collect()
    }

    /// Whether an event of `kind` has ended (its last form is not ongoing), where
    /// `pred` holds.
    pub fn ended(&self, kind: &str, pred: impl Fn(&Value) -> bool) -> bool {
        self.of_kind(kind)
            .iter()
            .any(|v| v["ongoing"] == false && pred(v))
    }

    pub fn dump(&self) -> String {
        self.lines
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// `events: N (kind n, …); checked X of Y frames[...]`, the last line on stderr.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    pub events: u64,
    pub by_kind: BTreeMap<String, u64>,
    pub checked: u64,
    pub seen: u64,
    pub line: String,
}

fn number(text: &str) -> u64 {
    text.replace(',', "")
        .parse()
        .unwrap_or_else(|_| panic!("{text:?} is not a count"))
}

impl Summary {
    /// The summary line among `stderr`'s lines.
    pub fn find(stderr: &str) -> Self {
        let line = stderr
            .lines()
            .rev()
            .find(|l| l.starts_with("events: "))
            .unwrap_or_else(|| panic!("no summary line on stderr:\n{stderr}"))
            .to_string();
        let rest = &line["events: ".len()..];
        let (head, tail) = rest.split_once(';').unwrap_or((rest, ""));
        let (count, kinds) = match head.split_once(" (") {
            Some((n, k)) => (n, k.trim_end_matches(')')),
            None => (head, ""),
        };
        let by_kind = kinds
            .split(", ")
            .filter(|k| !k.is_empty())
            .map(|k| {
                let (name, n) = k
                    .rsplit_once(' ')
                    .unwrap_or_else(|| panic!("{k:?} in {line:?}"));
                (name.to_string(), number(n))
            })
            .collect();
        let (checked, seen) = tail
            .trim()
            .strip_prefix("checked ")
            .and_then(|t| t.split_once(" of "))
            .map(|(c, s)| (number(c), number(s.split(' ').next().unwrap_or_default())))
            .unwrap_or((0, 0));
        Self {
            events: number(count.trim()),
            by_kind,
            checked,
            seen,
            line,
        }
    }
}

/// What an event is, as sources that found it on their own agree on it: a ring fault's
/// frame is when its reader came by, and a stall's length is measured by each, so
/// neither is part of it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tuple {
    pub kind: String,
    pub frames: Option<(u64, u64)>,
    pub env: Option<u64>,
    pub channel: Option<String>,
    pub index: Option<u64>,
    pub name: Option<String>,
    pub value: Option<String>,
    pub origin: Option<String>,
    pub ring: Option<String>,
    pub method: Option<String>,
}

impl Tuple {
    pub fn of(v: &Value) -> Self {
        let kind = v["kind"].as_str().unwrap_or_default().to_string();
        let text = |k: &str| v[k].as_str().map(str::to_string);
        let ring = RING_KINDS.contains(&kind.as_str());
        let frames = (!ring).then(|| {
            (
                v["first_frame"].as_u64().unwrap_or(u64::MAX),
                v["last_frame"].as_u64().unwrap_or(u64::MAX),
            )
        });
        let value = (kind != "stall" && !ring).then(|| match &v["value"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
        Self {
            frames,
            env: v["env"].as_u64(),
            channel: text("channel"),
            index: v["index"].as_u64(),
            name: text("name"),
            value,
            origin: text("origin"),
            ring: text("ring"),
            method: text("method"),
            kind,
        }
    }
}

/// An `events` process on a live segment, its stdout's JSON lines and its stderr read
/// on threads of their own.
pub struct EventsRun {
    child: Guarded,
    out: Receiver<String>,
    err: Receiver<String>,
    pub forms: Forms,
    pub stderr: Vec<String>,
}

/// How an `events` process ended.
#[derive(Debug)]
pub struct Ended {
    pub code: Option<i32>,
    pub forms: Forms,
    pub stderr: String,
}

impl Ended {
    pub fn summary(&self) -> Summary {
        Summary::find(&self.stderr)
    }
}

impl EventsRun {
    /// `events --shm NAME --json ARGS`, returned once it says it follows the segment
    /// (its detector and ring reader are set up: nothing published after is missed).
    pub fn start(name: &str, args: &[&str]) -> Self {
        let mut child = inspector()
            .args(["events", "--shm", name, "--json"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("inspector runs");
        let out = line_channel(child.stdout.take().expect("stdout"));
        let err = line_channel(child.stderr.take().expect("stderr"));
        let mut run = Self {
            child: Guarded::new(child),
            out,
            err,
            forms: Forms::default(),
            stderr: Vec::new(),
        };
        let prefix = format!("following {name}: ");
        let deadline = Instant::now() + DEADLINE;
        while !run.stderr.iter().any(|l| l.starts_with(&prefix)) {
            let left = deadline.saturating_duration_since(Instant::now());
            match run.err.recv_timeout(left) {
                Ok(line) => run.stderr.push(line),
                Err(e) => panic!(
                    "events did not say it follows {name} ({e}); its stderr:\n{}",
                    run.stderr.join("\n")
                ),
            }
        }
        run
    }

    pub fn pid(&mut self) -> u32 {
        self.child.child().id()
    }

    /// Reads its lines until `done` holds of the forms read so far; fails the test after
    /// the deadline, or if it exits first.
    pub fn read_until(&mut self, what: &str, done: impl Fn(&Forms) -> bool) {
        let deadline = Instant::now() + DEADLINE;
        while !done(&self.forms) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.out.recv_timeout(left) {
                Ok(line) => self.forms.push(&line),
                Err(RecvTimeoutError::Timeout) => {
                    panic!(
                        "events: no {what} within {DEADLINE:?}; it printed:\n{}",
                        self.forms.dump()
                    )
                }
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "events ended before {what}; it printed:\n{}\nstderr:\n{}",
                    self.forms.dump(),
                    self.drain_stderr()
                ),
            }
        }
    }

    fn drain_stderr(&mut self) -> String {
        drain(&self.err, &mut self.stderr)
    }

    /// Waits for it to exit by itself (within the deadline) and reads what it printed.
    pub fn finish(self) -> Ended {
        let Self {
            child,
            out,
            err,
            mut forms,
            mut stderr,
        } = self;
        let status = child.finish().status;
        // Every line, up to the end of its output (the reader threads may still hold
        // some).
        loop {
            match out.recv_timeout(DEADLINE) {
                Ok(line) => forms.push(&line),
                Err(RecvTimeoutError::Disconnected) => break,
                Err(RecvTimeoutError::Timeout) => panic!("events' output did not end"),
            }
        }
        let stderr = drain(&err, &mut stderr);
        Ended {
            code: status.code(),
            forms,
            stderr,
        }
    }

    /// Ctrl-C (SIGINT), then [`EventsRun::finish`].
    pub fn interrupt(mut self) -> Ended {
        interrupt(self.pid());
        self.finish()
    }
}

/// The rest of a reader's lines, until its end, after `kept`; all of them as one text.
fn drain(rx: &Receiver<String>, kept: &mut Vec<String>) -> String {
    loop {
        match rx.recv_timeout(DEADLINE) {
            Ok(line) => kept.push(line),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!("a child's stderr did not end"),
        }
    }
    kept.join("\n")
}

/// The applied fault of `kind` (and `side`, for stalls) in the peer's done line.
pub fn applied<'a>(done: &'a Value, kind: &str, side: Option<&str>) -> &'a Value {
    done["faults"]
        .as_array()
        .expect("faults")
        .iter()
        .find(|f| f["kind"] == kind && side.is_none_or(|s| f["side"] == s))
        .unwrap_or_else(|| panic!("no applied {kind} fault in {done}"))
}

/// The frame_seq the peer published an applied fault in.
pub fn frame_of(done: &Value, kind: &str, side: Option<&str>) -> u64 {
    applied(done, kind, side)["frame_seq"]
        .as_u64()
        .expect("an applied fault's frame_seq")
}

/// Steps of a peer run of every fault ([`every_fault`]).
pub const EVERY_FAULT_STEPS: u64 = 500;
/// Its rate: frames 5 ms apart, whose copies a follower takes on a loaded machine too.
pub const EVERY_FAULT_HZ: f64 = 200.0;
/// The length of each of its stalls.
pub const STALL_SECS: f64 = 0.6;
/// The share of envs of its done burst (more than the detector's 0.5).
pub const BURST_SHARE: f64 = 0.75;

/// One of each fault the peer writes, in a run of [`EVERY_FAULT_STEPS`] steps: a NaN in
/// env 3's observation 1 (`pole_angle`), +Inf in env 5's action 2, -Inf in env 7's
/// reward, an error response, an unanswered request, a malformed entry, a done burst, an
/// engine-side and a trainer-side stall.
pub fn every_fault() -> Value {
    json!([
        {"kind": "nan", "step": 40, "env": 3, "channel": "obs", "index": 1},
        {"kind": "inf", "step": 60, "env": 5, "channel": "act", "index": 2},
        {"kind": "-inf", "step": 80, "env": 7, "channel": "reward"},
        {"kind": "unanswered", "step": 90},
        {"kind": "rpc_error", "step": 100},
        {"kind": "malformed", "step": 120},
        {"kind": "done_burst", "step": 150, "share": BURST_SHARE},
        {"kind": "stall", "step": 200, "secs": STALL_SECS, "side": "engine"},
        {"kind": "stall", "step": 300, "secs": STALL_SECS, "side": "trainer"},
    ])
}

/// The envs the peer has done or truncated in frame `k` of a run of `envs` envs with a
/// done burst of `share` in it (the peer's formulas: `(k + 7 env) % 97 == 0` done,
/// `(k + 11 env) % 389 == 0` truncated, the first `ceil(share × envs)` done).
pub fn envs_ended(k: u64, envs: u64, share: f64) -> u64 {
    let burst = (share * envs as f64).ceil() as u64;
    (0..envs)
        .filter(|&e| {
            e < burst || (k + 7 * e).is_multiple_of(97) || (k + 11 * e).is_multiple_of(389)
        })
        .count() as u64
}

/// Records `sim engine ENGINE_ARGS` (lock-step) stepped by `sim client --hz 200` from
/// its first step: `record --all-envs --busy-budget 0` is running before the client
/// starts, and is stopped with Ctrl-C once the engine has published frame `until`. The
/// file.
pub fn record_from_the_first_step(tag: &str, engine_args: &[&str], until: u64) -> PathBuf {
    record_from_the_first_step_with(tag, engine_args, &[], until)
}

/// [`record_from_the_first_step`], `record` given `record_args` too.
pub fn record_from_the_first_step_with(
    tag: &str,
    engine_args: &[&str],
    record_args: &[&str],
    until: u64,
) -> PathBuf {
    let engine = SimEngine::start(tag, engine_args);
    let file = temp_file(tag, "mcap");
    let record = start_record(&engine.name, record_args, &file);
    let client = Guarded::new(sim_client(&engine.name, "200"));
    let a = lrbc::attach::attach(
        &lrbc::attach::Target::Shm(engine.name.clone()),
        lrbc::layout::LayoutChoice::Auto,
    )
    .expect("attach to the engine");
    let deadline = Instant::now() + DEADLINE;
    while a
        .segment
        .load_u64(a.geometry.counters.frame_seq)
        .unwrap_or(0)
        < until
    {
        assert!(
            Instant::now() < deadline,
            "the engine did not reach frame {until}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    record.stop();
    drop(client);
    file
}

/// `record --shm NAME --all-envs --busy-budget 0` running into a file, and the lines of
/// its stderr.
pub struct RecordRun {
    child: Guarded,
    stderr: Receiver<String>,
}

/// Starts `record --shm NAME --all-envs --busy-budget 0 RECORD_ARGS -o FILE` and waits
/// for its first progress line: the recorder and its detector are running.
pub fn start_record(name: &str, record_args: &[&str], file: &Path) -> RecordRun {
    let mut record = inspector()
        .args(["record", "--shm", name, "--all-envs", "--busy-budget", "0"])
        .args(record_args)
        .arg("-o")
        .arg(file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("record runs");
    let stderr = line_channel(record.stderr.take().expect("stderr"));
    let child = Guarded::new(record);
    let first = next_line(&stderr, "record's first progress line");
    assert!(first.starts_with("record: "), "{first}");
    RecordRun { child, stderr }
}

impl RecordRun {
    /// Waits until a progress line (one a second) says that `frames` frames are recorded,
    /// or `DEADLINE`, then [`stop`](Self::stop)s: a stop just after the run's last step
    /// can come before the recorder, which looks at the engine's pace, has taken the last
    /// frame.
    pub fn stop_once_recorded(self, frames: u64) {
        let deadline = Instant::now() + DEADLINE;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let Ok(line) = self.stderr.recv_timeout(left) else {
                break;
            };
            let recorded = line
                .strip_prefix("record: ")
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse::<u64>().ok());
            if recorded.is_some_and(|n| n >= frames) {
                break;
            }
        }
        self.stop();
    }

    /// Ctrl-C (SIGINT); checks that it exits 0 (its stderr in the failure's message).
    pub fn stop(mut self) {
        interrupt(self.child.child().id());
        let out = self.child.finish();
        let stderr: Vec<String> = self.stderr.try_iter().collect();
        assert_eq!(out.status.code(), Some(0), "record: {stderr:?}");
    }
}
