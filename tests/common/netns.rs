//! A slow link for the tests: a network namespace whose loopback is limited by `tc`'s
//! token bucket. Processes run inside it with [`Netns::command`] talk over that loopback
//! only; they share /dev/shm (the segments) with the rest of the machine.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A namespace, deleted when dropped (on a failing test's panic too).
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

/// Whether the tests run as root (the effective uid, from /proc).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

/// Runs a setup command; a failure fails the test.
fn setup(c: &mut Command) {
    let out = c
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{c:?}: {e}"));
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    /// A namespace whose loopback carries `rate_mbit` Mbit/s (burst 64 KiB, MTU 1500);
    /// None, saying why, where the machine cannot make one (not Linux, not root, no
    /// `ip` or `tc`): the test then returns early and passes.
    pub fn new(rate_mbit: f64) -> Option<Self> {
        let why = if !cfg!(target_os = "linux") {
            Some("network namespaces are Linux's")
        } else if !is_root() {
            Some("making a network namespace needs root")
        } else if tool("ip").is_none() || tool("tc").is_none() {
            Some("`ip` and `tc` are missing (Debian: apt-get install iproute2)")
        } else {
            None
        };
        if let Some(why) = why {
            eprintln!("skipped: no slow link: {why}");
            return None;
        }
        let (ip, tc) = (tool("ip")?, tool("tc")?);
        static N: AtomicUsize = AtomicUsize::new(0);
        let name = format!(
            "lrbc-link-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        setup(Command::new(&ip).args(["netns", "add", &name]));
        let ns = Self { name, ip };
        // Loopback's own MTU is 64 KiB: every packet would be larger than the burst.
        setup(
            ns.command(&ns.ip)
                .args(["link", "set", "lo", "mtu", "1500"]),
        );
        setup(ns.command(&ns.ip).args(["link", "set", "lo", "up"]));
        let rate = format!("{}kbit", (rate_mbit * 1000.0).round() as u64);
        setup(
            ns.command(&tc)
                .args(["qdisc", "add", "dev", "lo", "root", "tbf", "rate", &rate])
                .args(["burst", "64kb", "latency", "200ms"]),
        );
        Some(ns)
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
        let _ = Command::new(&self.ip)
            .args(["netns", "delete", &self.name])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
