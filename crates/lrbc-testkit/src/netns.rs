//! A slow link: a network namespace whose loopback is limited by `tc`'s token bucket
//! (MTU 1500, burst 64 KiB). Processes run inside it with [`Netns::command`] talk over
//! that loopback only; they share /dev/shm (the segments) with the rest of the machine.
//! Linux, as root, with `ip` and `tc` (Debian: iproute2).

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Why a link could not be made, as one line.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// This machine cannot make one (not Linux, not root, no `ip` or `tc`).
    #[error("{0}")]
    Unavailable(&'static str),
    /// A setup command failed: the command and why (its stderr).
    #[error("{command}: {why}")]
    Setup { command: String, why: String },
}

/// A namespace, deleted when dropped (on a failing test's panic too).
#[derive(Debug)]
pub struct Netns {
    pub name: String,
    ip: PathBuf,
}

/// A program in `PATH` or the system's sbin folders.
fn tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Whether this process runs as root (its effective uid, from /proc).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

/// `ip` and `tc`, or why this machine cannot make a link (not Linux, not root, no `ip`
/// or `tc`).
fn tools() -> Result<(PathBuf, PathBuf), &'static str> {
    if !cfg!(target_os = "linux") {
        return Err("network namespaces are Linux's");
    }
    if !is_root() {
        return Err("making a network namespace needs root");
    }
    match (tool("ip"), tool("tc")) {
        (Some(ip), Some(tc)) => Ok((ip, tc)),
        _ => Err("`ip` and `tc` are missing (Debian: apt-get install iproute2)"),
    }
}

/// Why this machine cannot make a link (not Linux, not root, no `ip` or `tc`), or None.
pub fn unavailable() -> Option<&'static str> {
    tools().err()
}

/// Runs a setup command to completion; its stderr in the error.
fn setup(c: &mut Command) -> Result<(), NetnsError> {
    let command = format!("{c:?}").replace('"', "");
    match c.stdin(Stdio::null()).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(NetnsError::Setup {
            command,
            why: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }),
        Err(e) => Err(NetnsError::Setup {
            command,
            why: e.to_string(),
        }),
    }
}

impl Netns {
    /// A namespace of a name of its own whose loopback carries `kbit` kbit/s.
    pub fn create(kbit: u64) -> Result<Self, NetnsError> {
        let (ip, tc) = tools().map_err(NetnsError::Unavailable)?;
        static N: AtomicUsize = AtomicUsize::new(0);
        // Relaxed: a counter for names, nothing behind it.
        let n = N.fetch_add(1, Ordering::Relaxed);
        let name = format!("lrbc-link-{}-{n}", std::process::id());
        setup(Command::new(&ip).args(["netns", "add", &name]))?;
        // From here the namespace is deleted whatever happens.
        let ns = Self { name, ip };
        // Loopback's own MTU is 64 KiB: every packet would be larger than the bucket's
        // burst lets through, and nothing would get through.
        setup(
            ns.command(&ns.ip)
                .args(["link", "set", "lo", "mtu", "1500"]),
        )?;
        setup(ns.command(&ns.ip).args(["link", "set", "lo", "up"]))?;
        let rate = format!("{kbit}kbit");
        setup(
            ns.command(&tc)
                .args(["qdisc", "add", "dev", "lo", "root", "tbf"])
                .args(["rate", &rate, "burst", "64kb", "latency", "200ms"]),
        )?;
        Ok(ns)
    }

    /// `program` run inside the namespace (`ip netns exec NAME program`: ip execs it, so
    /// the child's pid is the program's).
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut c = Command::new(&self.ip);
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Best effort when dropped: a namespace left behind is named after this process.
        let _ = Command::new(&self.ip)
            .args(["netns", "delete", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
