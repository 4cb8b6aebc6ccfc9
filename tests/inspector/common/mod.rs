//! Shared test support: the independent Python segment writer as a child process, the
//! inspector binary, and line readers with deadlines (a failing test fails, never hangs).

#![allow(
    dead_code,
    reason = "each test crate uses a different part of this module"
)]

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, bounded};
use serde_json::Value;

pub mod events;
pub mod fault_peer;
pub mod netns;
pub mod served;
#[cfg(windows)]
pub mod win32;
pub mod window;

/// How long any single expected event may take before the test fails.
pub const DEADLINE: Duration = Duration::from_secs(30);

pub fn unique_name(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "lrbc-test-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn inspector() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lrbc-inspector"))
}

pub fn writer_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/lrbc_segment.py")
}

/// Lines of a child's stdout, read on a named thread into a bounded channel.
pub fn line_channel(out: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = bounded(1024);
    std::thread::Builder::new()
        .name("test-line-reader".into())
        .spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
        .expect("spawn reader thread");
    rx
}

/// The inspector running `args`, and the lines of its stdout (its stderr in a pipe).
pub fn inspector_lines(args: &[&str]) -> (Child, Receiver<String>) {
    let mut child = inspector()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("inspector runs");
    let lines = line_channel(child.stdout.take().expect("stdout"));
    (child, lines)
}

/// `traffic --follow --json --duration SECS` on the segment `name`, returned once it is
/// following: the reader starts at read_pos, so status requests (`control --status`) go
/// until it prints an entry of a control ring, where a request and its response go.
pub fn follow_traffic(name: &str, secs: &str) -> (Child, Receiver<String>) {
    let (traffic, rx) = inspector_lines(&[
        "traffic",
        "--shm",
        name,
        "--follow",
        "--json",
        "--duration",
        secs,
    ]);
    let deadline = Instant::now() + DEADLINE;
    loop {
        assert!(
            Instant::now() < deadline,
            "traffic did not show a status request on the control ring"
        );
        let (code, _, err) =
            run_inspector(&["control", "--shm", name, "--service", "camera", "--status"]);
        assert_eq!(code, 0, "{err}");
        if let Ok(line) = rx.recv_timeout(Duration::from_secs(1)) {
            let v: Value = serde_json::from_str(&line).expect("traffic --json prints JSON");
            assert!(
                v["ring"].as_str().is_some_and(|r| r.starts_with("ctl_")),
                "{v}"
            );
            return (traffic, rx);
        }
    }
}

pub fn next_line(rx: &Receiver<String>, what: &str) -> String {
    rx.recv_timeout(DEADLINE)
        .unwrap_or_else(|_| panic!("no line within {DEADLINE:?} while waiting for {what}"))
}

/// The Python writer of `tests/py/lrbc_segment.py`, running in its own process.
pub struct PyWriter {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    pub name: String,
    /// What the writer says it wrote: the expected `dump --json`, plus `pid`.
    pub expected: Value,
}

impl PyWriter {
    pub fn start(tag: &str, args: &[&str]) -> Self {
        let name = unique_name(tag);
        let mut child = Command::new("python3")
            .arg(writer_script())
            .arg("--name")
            .arg(&name)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let stdin = child.stdin.take();
        let lines = line_channel(child.stdout.take().expect("stdout"));
        let first = next_line(&lines, "the writer's expectation");
        let expected: Value = serde_json::from_str(&first).expect("writer prints JSON");
        Self {
            child,
            stdin,
            lines,
            name,
            expected,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a command and returns the writer's answer line.
    pub fn send(&mut self, command: &str) -> String {
        let stdin = self.stdin.as_mut().expect("writer stdin");
        writeln!(stdin, "{command}").expect("writer accepts commands");
        stdin.flush().expect("flush");
        next_line(&self.lines, command)
    }

    /// `replace`: a new segment under the same name; returns the new expectation.
    pub fn replace(&mut self, envs: u32) -> Value {
        let line = self.send(&format!("replace {envs}"));
        self.expected = serde_json::from_str(&line).expect("JSON after replace");
        self.expected.clone()
    }

    pub fn path(&self) -> PathBuf {
        PathBuf::from("/dev/shm").join(&self.name)
    }
}

impl Drop for PyWriter {
    fn drop(&mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(5);
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

/// Runs the inspector to completion with a deadline; returns (exit code, stdout, stderr).
pub fn run_inspector(args: &[&str]) -> (i32, String, String) {
    let child = inspector()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("inspector runs");
    let out = wait_with_deadline(child);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub fn wait_with_deadline(child: Child) -> std::process::Output {
    let pid = child.id();
    let (tx, rx) = bounded(1);
    std::thread::Builder::new()
        .name("test-wait".into())
        .spawn(move || {
            let _ = tx.send(child.wait_with_output());
        })
        .expect("spawn waiter");
    match rx.recv_timeout(DEADLINE) {
        Ok(out) => out.expect("wait"),
        Err(_) => {
            let _ = Command::new("kill").arg("-9").arg(pid.to_string()).status();
            panic!("inspector did not finish within {DEADLINE:?}");
        }
    }
}

/// A child process that has exited and been reaped: its pid names no process.
pub fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().expect("wait true");
    pid
}

/// Sends SIGINT to a process.
pub fn interrupt(pid: u32) {
    let status = Command::new("kill")
        .arg("-INT")
        .arg(pid.to_string())
        .status()
        .expect("kill runs");
    assert!(status.success());
}

/// PYTHONPATH with the flatbuffers runtime and the generated code, which the test
/// command (`.ci/test`) installs under target/.
pub fn python_path() -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target");
    let (deps, gen_dir) = (root.join("pydeps"), root.join("pygen"));
    assert!(
        deps.join("flatbuffers").exists() && gen_dir.join("hazel").exists(),
        "run the test command (bash .ci/test), which installs the Python flatbuffers runtime into target/pydeps and generates target/pygen"
    );
    format!("{}:{}", deps.display(), gen_dir.display())
}

/// The folder of the Node packages the test command installs (`.ci/test`).
pub fn node_modules() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/nodedeps/node_modules");
    assert!(
        dir.join("@mcap/core").is_dir() && dir.join("flatbuffers_reflection").is_dir(),
        "run the test command (.ci/test), which installs tests/node's packages under target/nodedeps"
    );
    dir
}

/// Runs a Node script of `tests/node/` with `args` as a separate process and returns the
/// JSON it prints; a failing script fails the test.
pub fn node(script: &str, args: &[&str]) -> Value {
    script_json(
        "node",
        "tests/node",
        script,
        args,
        ("NODE_PATH", node_modules()),
    )
}

/// Runs a Python script of `tests/py/` with `args` as a separate process and returns the
/// JSON it prints; a failing script fails the test.
pub fn python(script: &str, args: &[&str]) -> Value {
    script_json(
        "python3",
        "tests/py",
        script,
        args,
        ("PYTHONPATH", python_path()),
    )
}

/// Runs `program` on `script` of the folder `dir` with `args` and `env`; the JSON it
/// prints, or a failed test saying what it printed.
fn script_json(
    program: &str,
    dir: &str,
    script: &str,
    args: &[&str],
    env: (&str, impl AsRef<std::ffi::OsStr>),
) -> Value {
    let out = wait_with_deadline(
        Command::new(program)
            .arg(
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join(dir)
                    .join(script),
            )
            .args(args)
            .env(env.0, env.1)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{program} runs: {e}")),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{script}: {text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{script}: {e}: {text}"))
}

/// A `sim engine` process on a segment of its own name, interrupted on drop.
pub struct SimEngine {
    pub child: Option<Child>,
    pub name: String,
}

impl SimEngine {
    /// Starts `sim engine ARGS` and waits until its segment exists.
    pub fn start(tag: &str, args: &[&str]) -> Self {
        let name = unique_name(tag);
        let child = inspector()
            .args(["sim", "engine", "--name", &name])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start sim engine");
        let path = PathBuf::from("/dev/shm").join(&name);
        let deadline = Instant::now() + DEADLINE;
        while !path.exists() {
            assert!(
                Instant::now() < deadline,
                "engine did not create its segment"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        Self {
            child: Some(child),
            name,
        }
    }
}

impl Drop for SimEngine {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            interrupt(child.id());
            let _ = child.wait();
        }
    }
}

/// A file for a test's output in the temporary folder.
pub fn temp_file(tag: &str, ext: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{}.{ext}", unique_name(tag)))
}

/// A folder name of its own for a test's output in the temporary folder (not created).
pub fn temp_dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(unique_name(tag))
}

/// `sim client --shm NAME --hz HZ`, its output discarded; the caller ends it.
pub fn sim_client(name: &str, hz: &str) -> Child {
    inspector()
        .args(["sim", "client", "--shm", name, "--hz", hz])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start sim client")
}

/// Records `sim engine ENGINE_ARGS` stepped by `sim client --hz 200` with `record
/// RECORD_ARGS` (which end it: `--duration`); asserts it succeeded. The file and
/// record's stderr.
pub fn record_live_run(tag: &str, engine_args: &[&str], record_args: &[&str]) -> (PathBuf, String) {
    let engine = SimEngine::start(tag, engine_args);
    let mut client = sim_client(&engine.name, "200");
    let out = temp_file(tag, "mcap");
    // Every frame, whatever the machine's load: the tests look for given frames (a NaN
    // at a given step) in the recording, which a recorder keeping to its busy-machine
    // budget may let pass while other tests load the machine.
    let record = inspector()
        .args(["record", "--shm", &engine.name, "--busy-budget", "0"])
        .args(record_args)
        .arg("-o")
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start record");
    let output = wait_with_deadline(record);
    let _ = client.kill();
    let _ = client.wait();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "record failed: {stderr}");
    (out, stderr)
}

/// [`record_live_run`] of an engine with 6 envs × obs `obs` × act 2, no images, that
/// writes a NaN at step 20, recording envs 0, 2 and 5 for 2 s.
pub fn record_nan_run(tag: &str, obs: &str) -> (PathBuf, String) {
    record_nan_run_with(tag, obs, &[])
}

/// [`record_nan_run`] with more options of `record` (e.g. `--compression lz4`).
pub fn record_nan_run_with(tag: &str, obs: &str, more: &[&str]) -> (PathBuf, String) {
    record_live_run(
        tag,
        &[
            "--envs",
            "6",
            "--obs",
            obs,
            "--act",
            "2",
            "--image",
            "none",
            "--nan-at-step",
            "20",
        ],
        &[&["--duration", "2", "--envs", "0,2,5"], more].concat(),
    )
}

/// A child process that is killed and reaped when dropped, so that a failing test leaves
/// nothing running (nor holding the test run's output open).
pub struct Guarded(Option<Child>);

impl Guarded {
    pub fn new(child: Child) -> Self {
        Self(Some(child))
    }

    pub fn child(&mut self) -> &mut Child {
        self.0.as_mut().expect("the child is there until finished")
    }

    /// Its output once it exits, within the deadline.
    pub fn finish(mut self) -> std::process::Output {
        wait_with_deadline(self.0.take().expect("the child is there until finished"))
    }

    /// Its output once it exits, within the deadline, asserting a clean exit.
    pub fn finish_cleanly(self) -> std::process::Output {
        let out = self.finish();
        assert_clean_exit(&out);
        out
    }
}

/// Asserts exit code 0, showing the program's stderr if not.
pub fn assert_clean_exit(out: &std::process::Output) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for Guarded {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Runs the ignored test `name` (its whole path) alone in a process of this test binary's
/// own, and fails with its output if it fails: for a test that must not share its
/// process with the others (a heap it counts, a console it sends Ctrl-C to).
pub fn in_a_process_of_its_own(name: &str) {
    let out = Command::new(std::env::current_exe().expect("this test binary"))
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{name} failed:\n{text}");
    assert!(text.contains("1 passed"), "{name} did not run:\n{text}");
}
