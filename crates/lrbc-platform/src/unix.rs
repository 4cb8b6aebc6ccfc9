//! The Unix (Linux) backend: each function through `libc` or `/proc`.

use super::CpuTimes;
#[cfg(feature = "process")]
use super::{ProcessUsage, Signal};

fn timespec_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the callers' clocks exist on Linux.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock of `frame_time_ns`,
/// `action_time_ns` and `sent_ns` (spec 2.1), shared by every process on the machine.
pub fn monotonic_now_ns() -> u64 {
    timespec_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time used by the calling thread, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`).
pub fn thread_cpu_ns() -> u64 {
    timespec_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Sets the calling thread's timer slack (how late the kernel may wake it from a sleep,
/// 50 µs by default), so that short naps of pollers stay short. Linux only.
pub fn set_timer_slack_ns(slack_ns: u64) {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer and affects only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, slack_ns as libc::c_ulong, 0, 0, 0)
    };
    #[cfg(not(target_os = "linux"))]
    // Not used on this platform.
    let _ = slack_ns;
}

/// Asks the scheduler for a short time slice for the calling thread (Linux 6.12 and later,
/// EEVDF's custom slice; no privilege needed). A thread that sleeps most of the time and
/// runs for a few microseconds when it wakes then gets the CPU at once on a busy machine,
/// instead of waiting for a running thread's whole slice (a few milliseconds). Older
/// kernels ignore the request; returns whether it was taken.
pub fn request_short_slice(slice_ns: u64) -> bool {
    #[cfg(target_os = "linux")]
    {
        /// `struct sched_attr` of sched_setattr(2), its first version (48 bytes).
        #[repr(C)]
        struct SchedAttr {
            size: u32,
            policy: u32,
            flags: u64,
            nice: i32,
            priority: u32,
            runtime: u64,
            deadline: u64,
            period: u64,
        }
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        // SAFETY: getpriority on this thread's own id only reads its nice value. The
        // request below carries it, as sched_setattr sets the nice value too. (Should the
        // read fail, -1 would ask for more priority than an unprivileged thread may have,
        // and the kernel refuses the request: nothing changes.)
        let nice = unsafe { libc::getpriority(libc::PRIO_PROCESS, tid as libc::id_t) };
        let attr = SchedAttr {
            size: size_of::<SchedAttr>() as u32,
            policy: libc::SCHED_OTHER as u32,
            flags: 0,
            nice,
            priority: 0,
            runtime: slice_ns,
            deadline: 0,
            period: 0,
        };
        // SAFETY: sched_setattr reads `attr.size` bytes of a live, initialised struct laid
        // out as the kernel's; it changes only this thread's scheduling.
        let r = unsafe { libc::syscall(libc::SYS_sched_setattr, 0, &attr as *const SchedAttr, 0) };
        r == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        // Not used on this platform.
        let _ = slice_ns;
        false
    }
}

/// Large allocations (256 KiB and up) go to their own mappings, returned to the system
/// when freed. glibc's default raises this threshold to the size of each large block
/// freed, up to 32 MiB, after which the transient buffers of a pass (tessellated plots,
/// copies of the segment's values) come from the heap and stay resident as free space
/// between live blocks: about 30 MiB more in the window over a long run. glibc only.
#[cfg(feature = "process")]
pub fn keep_large_allocations_mapped() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes plain integers; called from `cli::main` before any thread
    // exists, as glibc asks of its tuning calls.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
    }
}

/// Sets an environment variable for this process and the libraries it loads. Only for
/// the start of `main`, before any thread exists (the environment is not thread-safe).
#[cfg(feature = "process")]
pub fn set_env_at_startup(key: &str, value: &str) {
    // SAFETY: called from `cli::main` before it starts any thread, so nothing reads or
    // writes the environment concurrently.
    unsafe { std::env::set_var(key, value) };
}

/// Lowers the calling thread's scheduling priority (nice value), so that it runs in the
/// time the engine and the trainer leave over and never delays them.
pub(crate) fn lower_thread_priority(nice: i32) {
    #[cfg(not(target_os = "linux"))]
    // Not used on this platform.
    let _ = nice;
    #[cfg(target_os = "linux")]
    lower_linux_thread(nice);
}

#[cfg(target_os = "linux")]
fn lower_linux_thread(nice: i32) {
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // SAFETY: setpriority on this thread's own id changes only this thread's nice value.
    unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, nice) };
}

/// Sends `signal` to process `pid` (used to stop child processes cleanly). False if
/// there is no such process.
#[cfg(feature = "process")]
pub fn send_signal(pid: u32, signal: Signal) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        return false;
    }
    let sig = match signal {
        Signal::Interrupt => libc::SIGINT,
        Signal::Kill => libc::SIGKILL,
        Signal::Pause => libc::SIGSTOP,
        Signal::Resume => libc::SIGCONT,
    };
    // SAFETY: kill has no memory-safety preconditions; pid is a positive process id.
    unsafe { libc::kill(pid, sig) == 0 }
}

/// Sets `flag` on SIGINT (Ctrl-C) and SIGTERM instead of their default action (ending the
/// process at once), so that the command or the window stops as it would by itself.
#[cfg(feature = "process")]
pub fn stop_on_interrupt(flag: &std::sync::Arc<std::sync::atomic::AtomicBool>) {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // Registration fails only for forbidden signals; these two are allowed.
        let _ = signal_hook::flag::register(signal, std::sync::Arc::clone(flag));
    }
}

/// A Unix program has its terminal already; nothing to attach to.
#[cfg(feature = "process")]
pub fn attach_to_parent_console() {}

/// The user's home folder (`$HOME`).
pub fn home_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(std::path::PathBuf::from)
}

/// The user's pictures folder: `$XDG_PICTURES_DIR`, else `~/Pictures`.
pub fn pictures_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("XDG_PICTURES_DIR")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| home_dir().map(|h| h.join("Pictures")))
}

/// Restores the default action of SIGPIPE, so that writing to a closed pipe
/// (`lrbc-inspector traffic | head`) ends the process quietly, as Unix tools do,
/// instead of failing every later write.
#[cfg(feature = "process")]
pub fn default_sigpipe() {
    // SAFETY: setting a signal's disposition to SIG_DFL has no preconditions.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// Where the kernel cannot end children with their parent (not Linux), children are
/// ended by the tool on a clean exit only.
#[cfg(all(feature = "process", not(target_os = "linux")))]
pub fn terminate_with_parent(_command: &mut std::process::Command) {}

/// Makes a child process receive SIGTERM when this process dies, however it dies, so
/// that simulated engines started by `demo` or `sim bench` never outlive it (and their
/// SIGTERM handling removes their segments).
#[cfg(all(feature = "process", target_os = "linux"))]
pub fn terminate_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: the closure runs in the child between fork and exec and calls only prctl,
    // which is async-signal-safe; it touches no memory of the parent.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The system page size.
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(page).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// Where a mapping of part of a segment may start: the page size here.
pub fn allocation_granularity() -> u64 {
    page_size()
}

/// The machine's CPU time (`/proc/stat`); None where it cannot be read.
pub fn cpu_times() -> Option<CpuTimes> {
    parse_proc_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// The `cpu` line of Linux's `/proc/stat`: user nice system idle iowait irq softirq
/// steal …; the `cpuN` lines count the cores.
fn parse_proc_stat(text: &str) -> Option<CpuTimes> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 5 {
        return None;
    }
    let cores = text
        .lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    Some(CpuTimes {
        idle: v[3] + v[4],
        total: v.iter().sum(),
        cores: cores.max(1),
    })
}

/// Memory the machine can still give (`MemAvailable` of `/proc/meminfo`), bytes; None
/// where it is not known.
pub fn available_memory_bytes() -> Option<u64> {
    let m = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = m
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))?
        .split_whitespace()
        .nth(1)?
        .parse::<u64>()
        .ok()?;
    // 0 is not a reading: a machine running this has memory to give.
    Some(kib * 1024).filter(|&b| b > 0)
}

/// Resident memory of a process, KiB (`VmRSS` of `/proc/<pid>/status`).
pub fn resident_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// CPU seconds of the live threads of process `pid`, by thread name, to the
/// nanosecond (the scheduler's run time, `/proc/<pid>/task/<tid>/schedstat`).
pub fn threads_cpu_secs(pid: u32) -> Vec<(String, f64)> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out: Vec<(String, f64)> = Vec::new();
    for t in dir.filter_map(Result::ok) {
        let path = t.path();
        let name = std::fs::read_to_string(path.join("comm"))
            .unwrap_or_default()
            .trim()
            .to_string();
        let secs = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0.0, |ns| ns as f64 / 1e9);
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some((_, s)) => *s += secs,
            None => out.push((name, secs)),
        }
    }
    out
}

/// Waits for `child` to end and reaps it, returning its exit code (None: killed by a
/// signal) and what it used over its life (`wait4`).
#[cfg(feature = "process")]
pub fn wait_with_usage(
    child: &mut std::process::Child,
) -> std::io::Result<(Option<i32>, ProcessUsage)> {
    let pid = libc::pid_t::try_from(child.id()).map_err(std::io::Error::other)?;
    let mut status: libc::c_int = 0;
    // SAFETY: all-zero bytes are a valid `rusage` (plain integers and timevals).
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `pid` is our own child, not yet reaped (std's `Child` only reaps in
        // `wait`/`try_wait`, which the caller no longer calls); `status` and `usage` are
        // valid and writable.
        let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if r == pid {
            break;
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    // (tv_usec is below a million: an i64 on Linux, an i32 on macOS.)
    let secs =
        |t: libc::timeval| t.tv_sec as f64 + f64::from(u32::try_from(t.tv_usec).unwrap_or(0)) / 1e6;
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    Ok((
        code,
        ProcessUsage {
            cpu_secs: secs(usage.ru_utime) + secs(usage.ru_stime),
            context_switches: (usage.ru_nvcsw + usage.ru_nivcsw) as u64,
            // Kilobytes on Linux.
            peak_resident_kib: u64::try_from(usage.ru_maxrss).unwrap_or(0),
        },
    ))
}

/// Named mappings exist only on Windows.
pub fn named_sections() -> Option<Vec<String>> {
    None
}

/// Nothing to fit: Linux bounds what waits from `tcp_link`'s figures; macOS keeps its
/// own send buffer (see docs/remote.md).
pub fn fit_send_buffer(_stream: &std::net::TcpStream, _min: u64) -> Option<u64> {
    None
}

/// What the kernel says of a TCP connection's sending side (Linux: `SIOCOUTQ` and
/// `TCP_INFO`); None elsewhere, or when the socket does not say.
pub fn tcp_link(stream: &std::net::TcpStream) -> Option<super::TcpLink> {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd as _;
        let fd = stream.as_raw_fd();
        let mut queued: libc::c_int = 0;
        // SAFETY: SIOCOUTQ (= TIOCOUTQ) writes one int, the bytes not yet acknowledged,
        // to the out-parameter; the fd is the open socket `stream` owns.
        if unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &raw mut queued) } != 0 {
            return None;
        }
        // struct tcp_info, read as bytes: the kernel fills as much of it as it has.
        let mut info = [0u8; 232];
        let mut len = info.len() as libc::socklen_t;
        // SAFETY: the out-parameter is a buffer of `len` bytes; the kernel writes at
        // most `len` of them and says how many.
        let read = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_INFO,
                info.as_mut_ptr().cast(),
                &raw mut len,
            )
        } == 0;
        let len = len as usize;
        let u32_at = |at: usize| {
            (at + 4 <= len)
                .then(|| info.get(at..at + 4))
                .flatten()
                .and_then(|b| b.try_into().ok())
                .map(u32::from_ne_bytes)
        };
        let u64_at = |at: usize| {
            (at + 8 <= len)
                .then(|| info.get(at..at + 8))
                .flatten()
                .and_then(|b| b.try_into().ok())
                .map(u64::from_ne_bytes)
        };
        // Offsets of linux/tcp.h: tcpi_rtt 68, tcpi_bytes_acked 120, tcpi_min_rtt 148.
        if !read {
            return None;
        }
        Some(super::TcpLink {
            queued: u64::try_from(queued).unwrap_or(0),
            acked: u64_at(120)?,
            rtt_us: u32_at(68)?,
            min_rtt_us: u32_at(148)?,
        })
    }
    #[cfg(not(target_os = "linux"))]
    {
        // Not used on this platform.
        let _ = stream;
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  709770 11874 120869 1571559 2358 0 1062 2028 0 0\n\
                        cpu0 354885 5937 60434 785779 1179 0 531 1014 0 0\n";

    #[test]
    fn the_cpu_line_gives_idle_with_iowait_and_the_total_of_every_state() {
        let t = parse_proc_stat(STAT).unwrap();
        assert_eq!(t.idle, 1_571_559 + 2_358);
        assert_eq!(
            t.total,
            709_770 + 11_874 + 120_869 + 1_571_559 + 2_358 + 1_062 + 2_028
        );
        assert_eq!(t.cores, 1, "one cpuN line");
        assert_eq!(
            parse_proc_stat("cpu0 1 2 3 4 5\n"),
            None,
            "no aggregate line"
        );
        assert_eq!(parse_proc_stat("cpu  1 2 x 4 5\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 2 3\n"), None, "too few fields");
    }
}
