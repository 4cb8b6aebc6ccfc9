//! The Win32 calls of the Windows tests: the windows of a process, closing one,
//! whether a process runs, an exe's version resource and icons. Each call checked. And
//! the simulated run the window tests open, outside any console ([`Run`]).

#![allow(unsafe_code, reason = "Win32 calls, each with its SAFETY line")]

use std::path::Path;

use windows_sys::Win32::Foundation::{CloseHandle, HWND, LPARAM, RECT, STILL_ACTIVE};
use windows_sys::Win32::System::Threading::{
    GetExitCodeProcess, OpenProcess, PROCESS_QUERY_LIMITED_INFORMATION,
};
use windows_sys::Win32::UI::WindowsAndMessaging::{
    EnumWindows, GetWindowRect, GetWindowTextW, GetWindowThreadProcessId, IsWindowVisible,
    PostMessageW, WM_CLOSE,
};

/// A NUL-terminated UTF-16 string.
pub fn wide(s: &str) -> Vec<u16> {
    s.encode_utf16().chain(std::iter::once(0)).collect()
}

/// A visible top-level window of process `pid`: its handle and title.
pub fn windows_of(pid: u32) -> Vec<(HWND, String)> {
    struct Found {
        pid: u32,
        out: Vec<(HWND, String)>,
    }
    unsafe extern "system" fn each(hwnd: HWND, data: LPARAM) -> i32 {
        // SAFETY: `data` is the `&mut Found` passed to EnumWindows below, alive
        // for the whole enumeration.
        let found = unsafe { &mut *(data as *mut Found) };
        let mut owner = 0u32;
        // SAFETY: `hwnd` is a window handle given by EnumWindows; `owner` is writable.
        unsafe { GetWindowThreadProcessId(hwnd, &mut owner) };
        // SAFETY: as above.
        if owner == found.pid && unsafe { IsWindowVisible(hwnd) } != 0 {
            let mut buf = [0u16; 512];
            // SAFETY: `buf` is writable for its length.
            let n = unsafe { GetWindowTextW(hwnd, buf.as_mut_ptr(), buf.len() as i32) };
            let title = String::from_utf16_lossy(&buf[..n.max(0) as usize]);
            found.out.push((hwnd, title));
        }
        1
    }
    let mut found = Found {
        pid,
        out: Vec::new(),
    };
    // SAFETY: `each` matches WNDENUMPROC; `found` outlives the call.
    unsafe { EnumWindows(Some(each), (&raw mut found) as LPARAM) };
    found.out
}

/// Asks the window to close, as its close button does.
pub fn close(hwnd: HWND) {
    // SAFETY: posting WM_CLOSE has no memory-safety preconditions.
    let ok = unsafe { PostMessageW(hwnd, WM_CLOSE, 0, 0) };
    assert_ne!(ok, 0, "WM_CLOSE posted");
}

/// Whether process `pid` still runs.
pub fn running(pid: u32) -> bool {
    // SAFETY: OpenProcess has no memory-safety preconditions; null is checked.
    let h = unsafe { OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, 0, pid) };
    if h.is_null() {
        return false;
    }
    let mut code = 0u32;
    // SAFETY: `h` is a process handle with query rights; `code` is writable.
    let ok = unsafe { GetExitCodeProcess(h, &mut code) } != 0;
    // SAFETY: `h` was opened above and is closed once.
    unsafe { CloseHandle(h) };
    ok && code == STILL_ACTIVE as u32
}

/// The window's rectangle on the screen: left, top, width, height.
pub fn rect(hwnd: HWND) -> (i32, i32, i32, i32) {
    let mut r = RECT {
        left: 0,
        top: 0,
        right: 0,
        bottom: 0,
    };
    // SAFETY: `r` is writable.
    assert_ne!(unsafe { GetWindowRect(hwnd, &mut r) }, 0);
    (r.left, r.top, r.right - r.left, r.bottom - r.top)
}

/// A `\StringFileInfo` value of an exe's version resource.
pub fn version_string(exe: &Path, key: &str) -> Option<String> {
    use windows_sys::Win32::Storage::FileSystem::{
        GetFileVersionInfoSizeW, GetFileVersionInfoW, VerQueryValueW,
    };
    let path = wide(&exe.to_string_lossy());
    let mut handle = 0u32;
    // SAFETY: `path` is NUL-terminated; `handle` is writable.
    let size = unsafe { GetFileVersionInfoSizeW(path.as_ptr(), &mut handle) };
    if size == 0 {
        return None;
    }
    let mut data = vec![0u8; size as usize];
    // SAFETY: `data` is writable for `size` bytes.
    if unsafe { GetFileVersionInfoW(path.as_ptr(), 0, size, data.as_mut_ptr().cast()) } == 0 {
        return None;
    }
    let query = |sub: &str| -> Option<(*const u8, u32)> {
        let sub = wide(sub);
        let (mut p, mut len) = (std::ptr::null_mut(), 0u32);
        // SAFETY: `data` holds the version resource read above; `p` and `len` are
        // writable; the returned pointer points into `data`.
        let ok = unsafe { VerQueryValueW(data.as_ptr().cast(), sub.as_ptr(), &mut p, &mut len) };
        (ok != 0 && !p.is_null()).then_some((p.cast_const().cast(), len))
    };
    let (t, len) = query("\\VarFileInfo\\Translation")?;
    if len < 4 {
        return None;
    }
    // SAFETY: the translation value is at least 4 bytes inside `data`.
    let (lang, cp) = unsafe {
        (
            t.cast::<u16>().read_unaligned(),
            t.cast::<u16>().add(1).read_unaligned(),
        )
    };
    let (s, chars) = query(&format!("\\StringFileInfo\\{lang:04x}{cp:04x}\\{key}"))?;
    // SAFETY: a string value of `chars` UTF-16 units inside `data`.
    let units = unsafe { std::slice::from_raw_parts(s.cast::<u16>(), chars as usize) };
    Some(
        String::from_utf16_lossy(units)
            .trim_end_matches('\0')
            .to_string(),
    )
}

/// The icons an exe carries (what Explorer shows).
pub fn icon_count(exe: &Path) -> u32 {
    use windows_sys::Win32::UI::Shell::ExtractIconExW;
    let path = wide(&exe.to_string_lossy());
    // SAFETY: index -1 with null outputs asks only for the count.
    unsafe {
        ExtractIconExW(
            path.as_ptr(),
            -1,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    }
}

/// Not attached to any console: a Ctrl-C that a test sends to its console reaches none
/// of these processes.
const DETACHED_PROCESS: u32 = 0x0000_0008;

/// A `sim engine` (cams64, images) stepped by a `sim client` that balances its poles,
/// both outside any console, ended on drop.
pub struct Run {
    pub engine: std::process::Child,
    pub client: std::process::Child,
    pub name: String,
}

impl Run {
    pub fn start() -> Self {
        use std::os::windows::process::CommandExt as _;
        use std::process::Stdio;
        use std::time::{Duration, Instant};

        let engine = super::inspector()
            .args(["sim", "engine", "--preset", "cams64"])
            .creation_flags(DETACHED_PROCESS)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let name = format!("LuckyEngine_{}", engine.id());
        let deadline = Instant::now() + super::DEADLINE;
        while super::run_inspector(&["dump", "--shm", &name, "--json"]).0 != 0 {
            assert!(
                Instant::now() < deadline,
                "the engine's segment never appeared"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let client = super::inspector()
            .args(["sim", "client", "--shm", &name, "--hz", "200"])
            .args(["--policy", "balance"])
            .creation_flags(DETACHED_PROCESS)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Self {
            engine,
            client,
            name,
        }
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        for c in [&mut self.client, &mut self.engine] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
