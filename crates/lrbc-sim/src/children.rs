//! Child processes of the lrbc-inspector binary (simulated engine and client,
//! observers), ended with their parent, for the app's `demo` and the benchmarks.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use lrbc::attach::{Target, attach};
use lrbc::layout::LayoutChoice;
use lrbc_platform::{Signal, send_signal};

/// Why a child process could not be started, or did not come up: one line.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ChildError(pub String);

/// The lrbc-inspector binary: this program, or the one beside it when this program is
/// another of the workspace's (the benchmarks' `lrbc-bench`).
pub fn inspector_exe() -> Result<PathBuf, ChildError> {
    let this = std::env::current_exe()
        .map_err(|e| ChildError(format!("cannot find this program: {e}")))?;
    if this.file_stem().is_some_and(|s| s == "lrbc-inspector") {
        return Ok(this);
    }
    let beside = this.with_file_name(format!("lrbc-inspector{}", std::env::consts::EXE_SUFFIX));
    if beside.is_file() {
        Ok(beside)
    } else {
        Err(ChildError(format!(
            "{} is missing: build it first (cargo build --release -p lrbc-inspector)",
            beside.display()
        )))
    }
}

/// A child that is interrupted (SIGINT, then SIGKILL after a grace period) when dropped.
#[derive(Debug)]
pub struct ChildProcess {
    pub what: &'static str,
    pub child: Child,
}

impl ChildProcess {
    /// Runs lrbc-inspector ([`inspector_exe`]) with `args`.
    pub fn spawn(what: &'static str, args: &[String], stdout: Stdio) -> Result<Self, ChildError> {
        Self::spawn_program(&inspector_exe()?, what, args, stdout)
    }

    /// Runs `program` with `args`.
    pub fn spawn_program(
        program: &Path,
        what: &'static str,
        args: &[String],
        stdout: Stdio,
    ) -> Result<Self, ChildError> {
        let mut command = Command::new(program);
        lrbc_platform::terminate_with_parent(&mut command);
        let child = command
            .args(args)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| ChildError(format!("cannot start the {what}: {e}")))?;
        Ok(Self { what, child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `Some(code)` once it has exited.
    pub fn exited(&mut self) -> Option<i32> {
        self.child
            .try_wait()
            .ok()
            .flatten()
            .map(|s| s.code().unwrap_or(-1))
    }

    /// SIGINT, wait up to `grace`, then SIGKILL.
    pub fn stop(&mut self, grace: Duration) -> Option<i32> {
        if let Some(code) = self.exited() {
            return Some(code);
        }
        send_signal(self.pid(), Signal::Interrupt);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(code) = self.exited() {
                return Some(code);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // It may have exited already.
        let _ = self.child.kill();
        self.child.wait().ok().map(|s| s.code().unwrap_or(-1))
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(5));
    }
}

/// Starts a simulated engine (`sim engine`) of `preset` on segment `name`, with `extra`
/// arguments, and waits until its segment can be attached.
pub fn start_engine(
    name: &str,
    preset: crate::engine::Preset,
    extra: &[&str],
) -> Result<ChildProcess, ChildError> {
    let mut args: Vec<String> = vec![
        "sim".into(),
        "engine".into(),
        "--name".into(),
        name.into(),
        "--preset".into(),
        preset.as_str().into(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_string()));
    let mut engine = ChildProcess::spawn("engine", &args, Stdio::null())?;
    wait_for_segment(name, &mut engine, Duration::from_secs(30))?;
    Ok(engine)
}

/// Starts a simulated client (`sim client`) of segment `name` with `extra` arguments.
pub fn start_client(
    name: &str,
    extra: &[String],
    stdout: Stdio,
) -> Result<ChildProcess, ChildError> {
    let mut args: Vec<String> = vec!["sim".into(), "client".into(), "--shm".into(), name.into()];
    args.extend(extra.iter().cloned());
    ChildProcess::spawn("client", &args, stdout)
}

/// Waits until the segment `name` can be attached, or the engine exits, or the deadline.
pub fn wait_for_segment(
    name: &str,
    engine: &mut ChildProcess,
    timeout: Duration,
) -> Result<(), ChildError> {
    let deadline = Instant::now() + timeout;
    loop {
        if attach(&Target::Shm(name.to_string()), LayoutChoice::Auto).is_ok() {
            return Ok(());
        }
        if let Some(code) = engine.exited() {
            return Err(ChildError(format!(
                "the {} exited (code {code}) before its segment appeared",
                engine.what
            )));
        }
        if Instant::now() >= deadline {
            return Err(ChildError(format!(
                "segment {name} did not appear within {:.0} s",
                timeout.as_secs_f64()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
