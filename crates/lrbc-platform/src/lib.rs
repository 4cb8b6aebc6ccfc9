//! The operating-system calls of the LRBC crates, with a backend per platform: the
//! monotonic clock, thread priority and CPU time, the machine's idle time and memory,
//! process signals and resident memory, page size and allocation granularity, sockets'
//! send queues; and the CPU's vector instructions. Each backend offers the same
//! functions; this crate is the one home of their `unsafe` (the mappings' own calls are
//! `lrbc::segment`'s), each block with its `// SAFETY:` line.
//!
//! Modules, each using only those above it:
//! - `unix`: the Unix (Linux) backend, through `libc`
//! - `windows`: the Windows backend, through `windows-sys`
//! - `vector`: tests over many `f32`s at once, with AVX2 where the CPU has it
//!
//! The feature `process` adds process control, for the programs and the children they
//! start: `stop_on_interrupt` (signal-hook on Unix), `send_signal`,
//! `terminate_with_parent`, `wait_with_usage`, the console and settings at the start of
//! `main`. The contract crate does not enable it.

#![expect(
    unsafe_code,
    reason = "calls into the operating system that std does not offer, each with its SAFETY line"
)]

#[cfg(unix)]
mod unix;
#[cfg(unix)]
pub use unix::*;

pub mod vector;

#[cfg(windows)]
mod windows;
#[cfg(windows)]
pub use windows::*;

/// What a thread of the inspector does, which says how far it yields to the engine and
/// the trainer: the one table of the threads' priorities. On Unix each role is a nice
/// value; on Windows, a thread priority level (see `lower_thread_priority`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadRole {
    /// The frame follower (nice 0). It wakes about once a frame for a few microseconds,
    /// and a frame stays readable only until the engine writes the next one: a follower
    /// niced below the engine and the trainer is woken late whenever they keep both cores
    /// busy, and loses frames. What keeps it from slowing the run is the busy-machine
    /// budget, not its priority.
    Follower,
    /// The sampler's auxiliary thread: the attachment's state, re-attachment, camera
    /// images (nice 10).
    Sampler,
    /// The window's thread and the threads its drawing starts (nice 15).
    Window,
    /// Work no frame waits for: writing and compressing recordings, decoding ring
    /// traffic, serving, reading a baseline and comparing (nice 19). What it cannot do in
    /// time is queued, dropped or counted by its owner.
    Background,
}

impl ThreadRole {
    /// The role's nice value (Unix).
    pub const fn nice(self) -> i32 {
        match self {
            Self::Follower => 0,
            Self::Sampler => 10,
            Self::Window => 15,
            Self::Background => 19,
        }
    }
}

/// Gives the calling thread the priority of its role, so that it runs in the time the
/// engine and the trainer leave over (a thread's priority passes to the threads it
/// starts).
pub fn set_thread_role(role: ThreadRole) {
    lower_thread_priority(role.nice());
}

/// What to ask of another process (`send_signal`).
#[cfg(feature = "process")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// Stop cleanly (Ctrl-C; SIGINT). On Windows a process is ended at once.
    Interrupt,
    /// End now (SIGKILL; TerminateProcess).
    Kill,
    /// Pause (SIGSTOP); Unix only.
    Pause,
    /// Resume after a pause (SIGCONT); Unix only.
    Resume,
}

/// What a child process used over its life, read when it was reaped.
#[cfg(feature = "process")]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessUsage {
    /// User and system CPU seconds, every thread.
    pub cpu_secs: f64,
    /// Context switches, voluntary (a sleep or a wait) and not: how often its threads
    /// woke up, give or take the preemptions.
    pub context_switches: u64,
    /// The most resident memory it held at once, KiB (Linux: `ru_maxrss`; Windows: the
    /// peak working set).
    pub peak_resident_kib: u64,
}

/// What the kernel says of a TCP connection's sending side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpLink {
    /// Bytes written and not yet acknowledged by the peer (unsent ones included).
    pub queued: u64,
    /// Bytes the peer acknowledged since the connection began.
    pub acked: u64,
    /// The smoothed round trip, µs.
    pub rtt_us: u32,
    /// The shortest round trip seen, µs: the path without its queues.
    pub min_rtt_us: u32,
}

/// The machine's CPU time, all cores together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// Idle time (Linux: idle + iowait), in the platform's ticks.
    pub idle: u64,
    /// Every state, in the same ticks.
    pub total: u64,
    /// The cores these times are shared by.
    pub cores: usize,
}

// The calls' tests that need Linux's kernel; the Windows backend's are in `windows`.
#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn a_connection_s_unacknowledged_bytes_and_acknowledged_total_are_read() {
        use std::io::{Read as _, Write as _};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (mut accepted, _) = listener.accept().unwrap();
        let before = tcp_link(&accepted).unwrap();
        assert_eq!(before.queued, 0);
        accepted.write_all(&[7; 100_000]).unwrap();
        let mut got = vec![0; 100_000];
        client.read_exact(&mut got).unwrap();
        // The acknowledgements follow the reads; wait for the last of them.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut after = tcp_link(&accepted).unwrap();
        while after.queued > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
            after = tcp_link(&accepted).unwrap();
        }
        assert_eq!(after.queued, 0);
        assert!(
            after.acked >= before.acked + 100_000,
            "{before:?} {after:?}"
        );
    }

    #[test]
    fn a_short_slice_keeps_the_threads_nice_value() {
        // The follower asks for a short slice after its nice value is set; the request
        // carries the nice value, or it would put the thread back to 0.
        let nice = std::thread::Builder::new()
            .name("slice-test".into())
            .spawn(|| {
                set_thread_role(ThreadRole::Sampler);
                let taken = request_short_slice(100_000);
                // SAFETY: gettid has no preconditions; getpriority reads this thread's value.
                let n =
                    unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t) };
                (taken, n)
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(nice.1, ThreadRole::Sampler.nice(), "taken: {}", nice.0);
    }
}
