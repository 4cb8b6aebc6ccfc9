//! The Windows backend, through `windows-sys`; the named mappings of the session's
//! object namespace are `sections`'.

mod sections;
pub use sections::named_sections;

use std::sync::OnceLock;
#[cfg(feature = "process")]
use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use windows_sys::Win32::Foundation::{CloseHandle, FILETIME, HANDLE};
use windows_sys::Win32::System::Performance::{QueryPerformanceCounter, QueryPerformanceFrequency};
use windows_sys::Win32::System::ProcessStatus::{GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS};
use windows_sys::Win32::System::SystemInformation::{
    GetSystemInfo, GlobalMemoryStatusEx, MEMORYSTATUSEX, SYSTEM_INFO,
};
#[cfg(feature = "process")]
use windows_sys::Win32::System::Threading::{
    GetCurrentProcess, PROCESS_TERMINATE, TerminateProcess,
};
use windows_sys::Win32::System::Threading::{
    GetCurrentThread, GetProcessTimes, GetSystemTimes, GetThreadTimes, OpenProcess,
    PROCESS_QUERY_LIMITED_INFORMATION, SetThreadPriority, THREAD_PRIORITY_BELOW_NORMAL,
    THREAD_PRIORITY_LOWEST, THREAD_PRIORITY_NORMAL,
};
#[cfg(feature = "process")]
use windows_sys::core::BOOL;

use super::CpuTimes;
#[cfg(feature = "process")]
use super::Signal;

fn filetime_ticks(t: &FILETIME) -> u64 {
    (u64::from(t.dwHighDateTime) << 32) | u64::from(t.dwLowDateTime)
}

const ZERO_FILETIME: FILETIME = FILETIME {
    dwLowDateTime: 0,
    dwHighDateTime: 0,
};

fn qpc_frequency() -> u64 {
    static FREQ: OnceLock<u64> = OnceLock::new();
    *FREQ.get_or_init(|| {
        let mut f = 0i64;
        // SAFETY: `f` is a valid, writable i64; the call cannot fail on Windows XP and later.
        unsafe { QueryPerformanceFrequency(&mut f) };
        u64::try_from(f).ok().filter(|&f| f > 0).unwrap_or(1)
    })
}

/// The performance counter now, in nanoseconds: Windows' monotonic clock, shared by
/// every process on the machine (the engine's `Stopwatch` reads the same counter).
pub fn monotonic_now_ns() -> u64 {
    let mut c = 0i64;
    // SAFETY: `c` is a valid, writable i64.
    unsafe { QueryPerformanceCounter(&mut c) };
    let c = u128::try_from(c).unwrap_or(0);
    u64::try_from(c * 1_000_000_000 / u128::from(qpc_frequency())).unwrap_or(u64::MAX)
}

/// CPU time used by the calling thread (kernel + user), in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    let (mut c, mut e, mut k, mut u) = (ZERO_FILETIME, ZERO_FILETIME, ZERO_FILETIME, ZERO_FILETIME);
    // SAFETY: GetCurrentThread is a pseudo-handle valid in this thread; the four
    // FILETIMEs are valid and writable.
    let ok = unsafe { GetThreadTimes(GetCurrentThread(), &mut c, &mut e, &mut k, &mut u) };
    if ok == 0 {
        return 0;
    }
    (filetime_ticks(&k) + filetime_ticks(&u)).saturating_mul(100)
}

/// Timer slack is a Linux setting; Windows' sleeps are as short as its timer allows.
pub fn set_timer_slack_ns(_slack_ns: u64) {}

/// No such request on Windows: its scheduler preempts for a thread that wakes.
pub fn request_short_slice(_slice_ns: u64) -> bool {
    false
}

/// Windows does not say how much of a connection's sent data awaits acknowledgement
/// in a form this reads: the socket's own buffer is the sender's queue there.
pub fn tcp_link(_stream: &std::net::TcpStream) -> Option<super::TcpLink> {
    None
}

/// `SIO_IDEAL_SEND_BACKLOG_QUERY` (`_IOR('t', 123, ULONG)`, ws2tcpip.h; not in
/// windows-sys).
const SIO_IDEAL_SEND_BACKLOG_QUERY: u32 = 0x4004_747B;

/// Sizes the socket's send buffer to the ideal send backlog TCP estimates for the
/// connection (about its bandwidth × delay, at least `min` bytes), so that what waits
/// to be sent stays about what the link carries in a round trip; the size set, or None
/// when the system does not say (older Windows, Wine).
pub fn fit_send_buffer(stream: &std::net::TcpStream, min: u64) -> Option<u64> {
    use std::os::windows::io::AsRawSocket as _;
    use windows_sys::Win32::Networking::WinSock::{SO_SNDBUF, SOL_SOCKET, WSAIoctl, setsockopt};
    let socket = stream.as_raw_socket() as usize;
    let mut ideal: u32 = 0;
    let mut returned: u32 = 0;
    // SAFETY: the query writes one ULONG to the out-buffer of that size and its length
    // to `returned`; no overlapped I/O (null), and the socket is the open one `stream`
    // owns.
    let failed = unsafe {
        WSAIoctl(
            socket,
            SIO_IDEAL_SEND_BACKLOG_QUERY,
            std::ptr::null(),
            0,
            (&raw mut ideal).cast(),
            size_of::<u32>() as u32,
            &raw mut returned,
            std::ptr::null_mut(),
            None,
        )
    } != 0;
    if failed || returned as usize != size_of::<u32>() {
        return None;
    }
    let size = u64::from(ideal).max(min).min(i32::MAX as u64) as i32;
    // SAFETY: SO_SNDBUF takes an int, read from `size` of that length.
    let set = unsafe {
        setsockopt(
            socket,
            SOL_SOCKET,
            SO_SNDBUF,
            (&raw const size).cast(),
            size_of::<i32>() as i32,
        )
    } == 0;
    set.then_some(size as u64)
}

/// Nothing to tune: the Windows heap returns large blocks to the system by itself.
#[cfg(feature = "process")]
pub fn keep_large_allocations_mapped() {}

/// Sets an environment variable for this process and the libraries it loads. Only for
/// the start of `main`, before any thread exists.
#[cfg(feature = "process")]
pub fn set_env_at_startup(key: &str, value: &str) {
    // SAFETY: called from `cli::main` before it starts any thread, so nothing reads or
    // writes the environment concurrently.
    unsafe { std::env::set_var(key, value) };
}

/// Lowers the calling thread's priority so that it runs in the time the engine and the
/// trainer leave over. Unix nice values map to Windows' coarser levels: 10 and more is
/// "lowest", 1 to 9 "below normal", 0 and less "normal" (a thread that must not be
/// niced, the frame follower, stays at the level threads start with).
pub(crate) fn lower_thread_priority(nice: i32) {
    let level = if nice >= 10 {
        THREAD_PRIORITY_LOWEST
    } else if nice > 0 {
        THREAD_PRIORITY_BELOW_NORMAL
    } else {
        THREAD_PRIORITY_NORMAL
    };
    // SAFETY: GetCurrentThread is a pseudo-handle; the level is a valid priority.
    unsafe { SetThreadPriority(GetCurrentThread(), level) };
}

/// Ends process `pid` (`Interrupt` and `Kill` both terminate it: a console process
/// started without its own console cannot be sent Ctrl-C). `Pause` and `Resume` are
/// not available and return false.
#[cfg(feature = "process")]
pub fn send_signal(pid: u32, signal: Signal) -> bool {
    if pid == 0 || matches!(signal, Signal::Pause | Signal::Resume) {
        return false;
    }
    // SAFETY: OpenProcess has no memory-safety preconditions; a null handle is checked.
    let h = unsafe { OpenProcess(PROCESS_TERMINATE, 0, pid) };
    if h.is_null() {
        return false;
    }
    // SAFETY: `h` is a process handle opened above with PROCESS_TERMINATE.
    let ok = unsafe { TerminateProcess(h, 1) } != 0;
    close(h);
    ok
}

fn close(h: HANDLE) {
    // SAFETY: `h` is a handle this module opened and closes once.
    unsafe { CloseHandle(h) };
}

/// Windows has no SIGPIPE: a write to a closed pipe fails with an error, which the
/// printing code already ends on.
#[cfg(feature = "process")]
pub fn default_sigpipe() {}

/// Children started by `demo` and `sim bench` end when this process ends, however it
/// ends: this process is put once in a job object that kills its members when its
/// last handle closes, and children join the job of their parent. Best effort: where
/// Windows refuses the job, children are still ended by the tool on a clean exit.
#[cfg(feature = "process")]
pub fn terminate_with_parent(_command: &mut std::process::Command) {
    use windows_sys::Win32::System::JobObjects::{
        AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
        JOBOBJECT_EXTENDED_LIMIT_INFORMATION, JobObjectExtendedLimitInformation,
        SetInformationJobObject,
    };
    static JOB: OnceLock<usize> = OnceLock::new();
    JOB.get_or_init(|| {
        // SAFETY: null attributes and name create an unnamed job; a null result is checked.
        let job = unsafe { CreateJobObjectW(std::ptr::null(), std::ptr::null()) };
        if job.is_null() {
            return 0;
        }
        // SAFETY: JOBOBJECT_EXTENDED_LIMIT_INFORMATION is plain data; zeroes are valid.
        let mut info: JOBOBJECT_EXTENDED_LIMIT_INFORMATION = unsafe { std::mem::zeroed() };
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        // SAFETY: `job` is the job created above; `info` is the structure of that class
        // and its size is passed.
        let set = unsafe {
            SetInformationJobObject(
                job,
                JobObjectExtendedLimitInformation,
                (&raw const info).cast(),
                size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        };
        // SAFETY: `job` is valid; GetCurrentProcess is a pseudo-handle.
        if set == 0 || unsafe { AssignProcessToJobObject(job, GetCurrentProcess()) } == 0 {
            close(job);
            return 0;
        }
        // The handle stays open for the life of the process: closing it is what ends
        // the children.
        job as usize
    });
}

/// The flags that a console's Ctrl-C, Ctrl-Break or close sets (`stop_on_interrupt`).
#[cfg(feature = "process")]
fn stop_flags() -> &'static std::sync::Mutex<Vec<Arc<AtomicBool>>> {
    static FLAGS: OnceLock<std::sync::Mutex<Vec<Arc<AtomicBool>>>> = OnceLock::new();
    FLAGS.get_or_init(Default::default)
}

/// Windows calls this on a thread of its own for each console event.
#[cfg(feature = "process")]
unsafe extern "system" fn on_console_event(event: u32) -> BOOL {
    use windows_sys::Win32::System::Console::{
        CTRL_BREAK_EVENT, CTRL_C_EVENT, CTRL_CLOSE_EVENT, CTRL_LOGOFF_EVENT, CTRL_SHUTDOWN_EVENT,
    };
    if !matches!(
        event,
        CTRL_C_EVENT
            | CTRL_BREAK_EVENT
            | CTRL_CLOSE_EVENT
            | CTRL_LOGOFF_EVENT
            | CTRL_SHUTDOWN_EVENT
    ) {
        return 0;
    }
    let flags = stop_flags()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    for f in &flags {
        // Relaxed: a flag with no data behind it (its readers poll it).
        f.store(true, Ordering::Relaxed);
    }
    if event != CTRL_C_EVENT && event != CTRL_BREAK_EVENT {
        // Windows ends the process as soon as this returns (the console closes, the user
        // logs off): give the main thread the time Windows allows (5 s) to finish; its
        // exit ends this thread.
        std::thread::sleep(std::time::Duration::from_secs(10));
    }
    1
}

/// Sets `flag` on Ctrl-C or Ctrl-Break in the console, and when the console closes or
/// the user logs off, instead of the default (ending the process at once), so that the
/// command or the window stops as it would by itself. Without a console it is never set
/// from here (the window is closed by its own button, or by `taskkill`, which closes it).
#[cfg(feature = "process")]
pub fn stop_on_interrupt(flag: &Arc<AtomicBool>) {
    use windows_sys::Win32::System::Console::SetConsoleCtrlHandler;
    let mut flags = stop_flags()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if flags.is_empty() {
        // SAFETY: `on_console_event` has the signature of a PHANDLER_ROUTINE and lives
        // as long as the program.
        unsafe { SetConsoleCtrlHandler(Some(on_console_event), 1) };
    }
    flags.push(Arc::clone(flag));
}

/// This program is a Windows GUI program (no console window when started from
/// Explorer). Started from a console, it attaches to that console and writes its
/// command-line output there: each standard handle the parent did not give (no pipe,
/// file or NUL) is pointed at the console. Handles the parent gave are kept as they are.
#[cfg(feature = "process")]
pub fn attach_to_parent_console() {
    use windows_sys::Win32::Foundation::{GENERIC_READ, GENERIC_WRITE, INVALID_HANDLE_VALUE};
    use windows_sys::Win32::Storage::FileSystem::{
        CreateFileW, FILE_SHARE_READ, FILE_SHARE_WRITE, OPEN_EXISTING,
    };
    use windows_sys::Win32::System::Console::{
        ATTACH_PARENT_PROCESS, AttachConsole, GetStdHandle, STD_ERROR_HANDLE, STD_INPUT_HANDLE,
        STD_OUTPUT_HANDLE, SetStdHandle,
    };
    let given = |id| {
        // SAFETY: GetStdHandle has no preconditions.
        let h = unsafe { GetStdHandle(id) };
        !h.is_null() && h != INVALID_HANDLE_VALUE
    };
    let ids = [STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, STD_ERROR_HANDLE];
    if ids.iter().all(|&id| given(id)) {
        return;
    }
    // SAFETY: AttachConsole has no memory-safety preconditions; failure is checked:
    // no parent console (started from Explorer) ends here, while "access denied" means
    // that this process has a console already (Wine gives GUI programs their parent's).
    if unsafe { AttachConsole(ATTACH_PARENT_PROCESS) } == 0
        && std::io::Error::last_os_error().raw_os_error()
            != Some(windows_sys::Win32::Foundation::ERROR_ACCESS_DENIED as i32)
    {
        return;
    }
    for id in ids {
        if given(id) {
            continue;
        }
        let device: Vec<u16> = if id == STD_INPUT_HANDLE {
            "CONIN$"
        } else {
            "CONOUT$"
        }
        .encode_utf16()
        .chain(std::iter::once(0))
        .collect();
        // SAFETY: `device` is a NUL-terminated name that outlives the call; null security
        // attributes and template are allowed; an invalid result is checked.
        let h = unsafe {
            CreateFileW(
                device.as_ptr(),
                GENERIC_READ | GENERIC_WRITE,
                FILE_SHARE_READ | FILE_SHARE_WRITE,
                std::ptr::null(),
                OPEN_EXISTING,
                0,
                std::ptr::null_mut(),
            )
        };
        if h != INVALID_HANDLE_VALUE {
            // SAFETY: `h` is a console handle opened above, kept open for the process's life.
            unsafe { SetStdHandle(id, h) };
        }
    }
}

/// A known folder's path (`SHGetKnownFolderPath`), None where Windows has none.
fn known_folder(id: &windows_sys::core::GUID) -> Option<std::path::PathBuf> {
    use std::os::windows::ffi::OsStringExt as _;
    use windows_sys::Win32::System::Com::CoTaskMemFree;
    use windows_sys::Win32::UI::Shell::SHGetKnownFolderPath;
    let mut path: windows_sys::core::PWSTR = std::ptr::null_mut();
    // SAFETY: `id` is a valid GUID; `path` is writable; a null token is the current
    // user. The string Windows returns is freed below, on success and failure alike.
    let hr = unsafe { SHGetKnownFolderPath(id, 0, std::ptr::null_mut(), &mut path) };
    let out = (hr >= 0 && !path.is_null()).then(|| {
        // SAFETY: on success `path` is a NUL-terminated UTF-16 string; its length is
        // counted up to the NUL.
        let units = unsafe {
            let len = (0..).take_while(|&i| *path.add(i) != 0).count();
            std::slice::from_raw_parts(path, len)
        };
        std::path::PathBuf::from(std::ffi::OsString::from_wide(units))
    });
    // SAFETY: `path` was allocated by SHGetKnownFolderPath (or is null, which is allowed).
    unsafe { CoTaskMemFree(path.cast()) };
    out.filter(|p| !p.as_os_str().is_empty())
}

/// The user's profile folder (`%USERPROFILE%`, `C:\Users\NAME`).
pub fn home_dir() -> Option<std::path::PathBuf> {
    known_folder(&windows_sys::Win32::UI::Shell::FOLDERID_Profile)
}

/// The user's Pictures folder (where Windows keeps it, perhaps moved to OneDrive).
pub fn pictures_dir() -> Option<std::path::PathBuf> {
    known_folder(&windows_sys::Win32::UI::Shell::FOLDERID_Pictures)
}

fn system_info() -> SYSTEM_INFO {
    // SAFETY: SYSTEM_INFO is plain data; zeroes are valid.
    let mut info: SYSTEM_INFO = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a valid, writable SYSTEM_INFO.
    unsafe { GetSystemInfo(&mut info) };
    info
}

/// The system page size.
pub fn page_size() -> u64 {
    Some(u64::from(system_info().dwPageSize))
        .filter(|&p| p > 0)
        .unwrap_or(4096)
}

/// Where a mapped view may start: the allocation granularity (64 KiB), not the page.
pub fn allocation_granularity() -> u64 {
    Some(u64::from(system_info().dwAllocationGranularity))
        .filter(|&g| g > 0)
        .unwrap_or(65_536)
}

/// The machine's CPU time (`GetSystemTimes`, 100 ns ticks; kernel time includes idle).
pub fn cpu_times() -> Option<CpuTimes> {
    let (mut idle, mut kernel, mut user) = (ZERO_FILETIME, ZERO_FILETIME, ZERO_FILETIME);
    // SAFETY: the three FILETIMEs are valid and writable.
    if unsafe { GetSystemTimes(&mut idle, &mut kernel, &mut user) } == 0 {
        return None;
    }
    Some(CpuTimes {
        idle: filetime_ticks(&idle),
        total: filetime_ticks(&kernel) + filetime_ticks(&user),
        cores: std::thread::available_parallelism().map_or(1, usize::from),
    })
}

/// Physical memory the machine can still give, bytes; None where it is not known (a
/// reading of 0, which Wine gives at times, is not a reading).
pub fn available_memory_bytes() -> Option<u64> {
    // SAFETY: MEMORYSTATUSEX is plain data; zeroes are valid.
    let mut m: MEMORYSTATUSEX = unsafe { std::mem::zeroed() };
    m.dwLength = size_of::<MEMORYSTATUSEX>() as u32;
    // SAFETY: `m` is a valid MEMORYSTATUSEX with its length set.
    let ok = unsafe { GlobalMemoryStatusEx(&mut m) } != 0;
    Some(m.ullAvailPhys).filter(|&b| ok && b > 0)
}

fn with_process<T>(pid: u32, f: impl FnOnce(HANDLE) -> Option<T>) -> Option<T> {
    // SAFETY: OpenProcess has no memory-safety preconditions; a null handle is checked.
    let h = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if h.is_null() {
        return None;
    }
    let out = f(h);
    close(h);
    out
}

/// Resident memory (working set) of a process, KiB.
pub fn resident_kib(pid: u32) -> Option<u64> {
    with_process(pid, |h| {
        // SAFETY: PROCESS_MEMORY_COUNTERS is plain data; zeroes are valid.
        let mut m: PROCESS_MEMORY_COUNTERS = unsafe { std::mem::zeroed() };
        let cb = size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
        // SAFETY: `h` is a process handle with query rights; `m` is writable, of size `cb`.
        let ok = unsafe { GetProcessMemoryInfo(h, &mut m, cb) } != 0;
        ok.then_some(m.WorkingSetSize as u64 / 1024)
    })
}

/// Waits for `child` to end and returns its exit code and what it used over its life:
/// its CPU time; Windows does not count a process's context switches, so that is 0.
#[cfg(feature = "process")]
pub fn wait_with_usage(
    child: &mut std::process::Child,
) -> std::io::Result<(Option<i32>, super::ProcessUsage)> {
    let pid = child.id();
    // Read before the handle closes: the process has ended but is not yet released.
    let status = child.wait()?;
    let cpu_secs = threads_cpu_secs(pid).first().map_or(0.0, |(_, s)| *s);
    let peak_resident_kib = with_process(pid, |h| {
        // SAFETY: PROCESS_MEMORY_COUNTERS is plain data; zeroes are valid.
        let mut m: PROCESS_MEMORY_COUNTERS = unsafe { std::mem::zeroed() };
        let cb = size_of::<PROCESS_MEMORY_COUNTERS>() as u32;
        // SAFETY: `h` is a process handle with query rights; `m` is writable, of size `cb`.
        let ok = unsafe { GetProcessMemoryInfo(h, &mut m, cb) } != 0;
        ok.then_some(m.PeakWorkingSetSize as u64 / 1024)
    })
    .unwrap_or(0);
    Ok((
        status.code(),
        super::ProcessUsage {
            cpu_secs,
            context_switches: 0,
            peak_resident_kib,
        },
    ))
}

/// CPU seconds of process `pid`. Windows does not name threads for other processes
/// cheaply, so the whole process is one entry, named "process".
pub fn threads_cpu_secs(pid: u32) -> Vec<(String, f64)> {
    with_process(pid, |h| {
        let (mut c, mut e, mut k, mut u) =
            (ZERO_FILETIME, ZERO_FILETIME, ZERO_FILETIME, ZERO_FILETIME);
        // SAFETY: `h` is a process handle with query rights; the FILETIMEs are writable.
        let ok = unsafe { GetProcessTimes(h, &mut c, &mut e, &mut k, &mut u) } != 0;
        ok.then(|| (filetime_ticks(&k) + filetime_ticks(&u)) as f64 / 1e7)
    })
    .map(|secs| vec![("process".to_string(), secs)])
    .unwrap_or_default()
}
