//! The Windows GUI program started from a console, under Wine in CI (`.ci/windows`): as
//! a shell starts it (no standard handles), it attaches to the console and prints there,
//! keeps its exit codes, and Ctrl-C stops a command and closes the window as its close
//! button does (the recording under way finished). Each test runs alone in a process of
//! the test binary's own, which takes a console of its own: a Ctrl-C in a console reaches
//! every program attached to it, the other tests' children too.

#![cfg(windows)]
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]
#![allow(unsafe_code, reason = "the console's Win32 calls")]

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::win32 as win;
use common::*;

fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_lrbc-inspector"))
}

mod console {
    //! A console of this test process's own, as a terminal gives, and programs started
    //! in it as a shell starts a GUI program: no standard handles.

    use std::path::Path;
    use std::sync::Mutex;

    use windows_sys::Win32::Foundation::{
        CloseHandle, GENERIC_READ, GENERIC_WRITE, HANDLE, INVALID_HANDLE_VALUE, WAIT_OBJECT_0,
    };
    use windows_sys::Win32::Storage::FileSystem::{
        CreateFileW, FILE_SHARE_READ, FILE_SHARE_WRITE, OPEN_EXISTING,
    };
    use windows_sys::Win32::System::Console::{
        AllocConsole, CONSOLE_SCREEN_BUFFER_INFO, COORD, CTRL_C_EVENT, FreeConsole,
        GenerateConsoleCtrlEvent, GetConsoleScreenBufferInfo, GetStdHandle,
        ReadConsoleOutputCharacterW, STD_ERROR_HANDLE, STD_INPUT_HANDLE, STD_OUTPUT_HANDLE,
        SetConsoleCtrlHandler, SetStdHandle,
    };
    use windows_sys::Win32::System::Threading::{
        CreateProcessW, GetExitCodeProcess, PROCESS_INFORMATION, STARTF_USESTDHANDLES,
        STARTUPINFOW, TerminateProcess, WaitForSingleObject,
    };

    /// One console per test process: the tests that use it take turns.
    pub static TURN: Mutex<()> = Mutex::new(());

    /// This test process's answer to Ctrl-C in its console: handled, nothing done.
    unsafe extern "system" fn swallow(_event: u32) -> windows_sys::core::BOOL {
        1
    }

    /// Gives this process a console of its own (once), which ignores Ctrl-C itself: a
    /// Ctrl-C in the console then reaches the programs started in it.
    pub fn ensure() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            // SAFETY: no preconditions; whatever console Wine gave this process is
            // replaced by a new one; `swallow` matches PHANDLER_ROUTINE.
            // AllocConsole points the standard handles at the new console: the test
            // run's output keeps going where it went.
            unsafe {
                let ids = [STD_INPUT_HANDLE, STD_OUTPUT_HANDLE, STD_ERROR_HANDLE];
                let saved = ids.map(|id| GetStdHandle(id));
                FreeConsole();
                assert_ne!(AllocConsole(), 0, "a console of the test's own");
                for (id, h) in ids.into_iter().zip(saved) {
                    SetStdHandle(id, h);
                }
                // A handler, not "ignore" (None): that would pass to the programs
                // started here, and Ctrl-C would reach none of them.
                SetConsoleCtrlHandler(Some(swallow), 1);
            }
        });
    }

    /// The text on the console's screen buffer, rows joined by newlines.
    pub fn text() -> String {
        let name = crate::common::win32::wide("CONOUT$");
        // SAFETY: `name` is NUL-terminated; the handle is closed below.
        let out = unsafe {
            CreateFileW(
                name.as_ptr(),
                GENERIC_READ | GENERIC_WRITE,
                FILE_SHARE_READ | FILE_SHARE_WRITE,
                std::ptr::null(),
                OPEN_EXISTING,
                0,
                std::ptr::null_mut(),
            )
        };
        assert_ne!(
            out, INVALID_HANDLE_VALUE,
            "the console's screen buffer opens"
        );
        // SAFETY: plain data; zeroes are valid.
        let mut info: CONSOLE_SCREEN_BUFFER_INFO = unsafe { std::mem::zeroed() };
        // SAFETY: `out` is a console output handle; `info` is writable.
        assert_ne!(unsafe { GetConsoleScreenBufferInfo(out, &mut info) }, 0);
        let (w, h) = (info.dwSize.X.max(1) as usize, info.dwSize.Y.max(1) as usize);
        let mut buf = vec![0u16; w * h];
        let mut read = 0u32;
        // SAFETY: `buf` is writable for w × h cells; `read` is writable.
        unsafe {
            ReadConsoleOutputCharacterW(
                out,
                buf.as_mut_ptr(),
                buf.len() as u32,
                COORD { X: 0, Y: 0 },
                &mut read,
            );
            CloseHandle(out);
        }
        buf.truncate(read as usize);
        buf.chunks(w)
            .map(|row| String::from_utf16_lossy(row).trim_end().to_string())
            .filter(|r| !r.is_empty())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A program started in this console as a shell starts a GUI program.
    pub struct Started {
        pub pid: u32,
        process: HANDLE,
    }

    pub fn start(exe: &Path, args: &[&str]) -> Started {
        let mut line = format!("\"{}\"", exe.display());
        for a in args {
            line.push_str(&format!(" \"{a}\""));
        }
        let mut line = crate::common::win32::wide(&line);
        // SAFETY: plain data; zeroes are valid.
        let mut si: STARTUPINFOW = unsafe { std::mem::zeroed() };
        si.cb = size_of::<STARTUPINFOW>() as u32;
        // No standard handles, as a console gives a GUI program.
        si.dwFlags = STARTF_USESTDHANDLES;
        // SAFETY: plain data; zeroes are valid.
        let mut pi: PROCESS_INFORMATION = unsafe { std::mem::zeroed() };
        // SAFETY: `line` is a writable NUL-terminated command line; `si` and `pi` are
        // valid; no handles are inherited.
        let ok = unsafe {
            CreateProcessW(
                std::ptr::null(),
                line.as_mut_ptr(),
                std::ptr::null(),
                std::ptr::null(),
                0,
                0,
                std::ptr::null(),
                std::ptr::null(),
                &si,
                &mut pi,
            )
        };
        assert_ne!(ok, 0, "the program starts");
        // SAFETY: the thread handle is not needed.
        unsafe { CloseHandle(pi.hThread) };
        Started {
            pid: pi.dwProcessId,
            process: pi.hProcess,
        }
    }

    impl Started {
        /// Ctrl-C in the console: every program attached to it gets it (the tests'
        /// engines and clients are not attached: [`super::Run`]).
        pub fn ctrl_c(&self) {
            // SAFETY: no memory-safety preconditions.
            let ok = unsafe { GenerateConsoleCtrlEvent(CTRL_C_EVENT, 0) };
            assert_ne!(ok, 0, "Ctrl-C sent");
        }

        /// Its exit code, within the deadline.
        pub fn exit_code(&self) -> u32 {
            let ms = super::DEADLINE.as_millis() as u32;
            // SAFETY: `process` is this program's handle, open until drop.
            let waited = unsafe { WaitForSingleObject(self.process, ms) };
            assert_eq!(
                waited,
                WAIT_OBJECT_0,
                "it exits within {:?}",
                super::DEADLINE
            );
            let mut code = 0u32;
            // SAFETY: as above; `code` is writable.
            unsafe { GetExitCodeProcess(self.process, &mut code) };
            code
        }
    }

    impl Drop for Started {
        fn drop(&mut self) {
            // A test that failed leaves nothing running.
            // SAFETY: `process` is this program's handle, open until here.
            unsafe { TerminateProcess(self.process, 1) };
            // SAFETY: the handle is closed once.
            unsafe { CloseHandle(self.process) };
        }
    }
}

/// Waits until the console shows `needle`; the console's text.
fn console_shows(needle: &str) -> String {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let text = console::text();
        if text.contains(needle) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "the console never showed {needle:?}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn started_from_a_console_the_command_line_prints_there_and_ctrl_c_stops_it() {
    in_a_process_of_its_own(
        "windows_console::started_from_a_console_the_command_line_prints_there_and_ctrl_c_stops_it_alone",
    );
}

#[test]
#[ignore = "run by the test of the same name in a process of its own: its console's Ctrl-C reaches every program of the process's console"]
fn started_from_a_console_the_command_line_prints_there_and_ctrl_c_stops_it_alone() {
    let _turn = console::TURN.lock().unwrap_or_else(|e| e.into_inner());
    console::ensure();
    let exe = exe();
    let version = console::start(&exe, &["--version"]);
    assert_eq!(version.exit_code(), 0);
    console_shows(&format!("lrbc-inspector {}", env!("CARGO_PKG_VERSION")));
    let missing = console::start(&exe, &["dump", "--shm", "no-such-segment-console"]);
    assert_eq!(missing.exit_code(), 1);
    console_shows("error: ");
    let usage = console::start(&exe, &["watch", "--count", "0"]);
    assert_eq!(usage.exit_code(), 2);

    let run = win::Run::start();
    let watch = console::start(&exe, &["watch", "--shm", &run.name, "--interval", "0.2"]);
    console_shows("frame_seq");
    watch.ctrl_c();
    assert_eq!(watch.exit_code(), 0, "Ctrl-C stops watch cleanly");
}

#[test]
fn ctrl_c_closes_the_window_as_its_close_button_does_and_finishes_the_recording() {
    in_a_process_of_its_own(
        "windows_console::ctrl_c_closes_the_window_as_its_close_button_does_and_finishes_the_recording_alone",
    );
}

#[test]
#[ignore = "run by the test of the same name in a process of its own: its console's Ctrl-C reaches every program of the process's console"]
fn ctrl_c_closes_the_window_as_its_close_button_does_and_finishes_the_recording_alone() {
    let _turn = console::TURN.lock().unwrap_or_else(|e| e.into_inner());
    console::ensure();
    let run = win::Run::start();
    let window = console::start(&exe(), &["--shm", &run.name, "--record"]);
    let title = format!("lrbc-inspector — {}", run.name);
    let deadline = Instant::now() + DEADLINE * 2;
    while !win::windows_of(window.pid).iter().any(|(_, t)| *t == title) {
        assert!(Instant::now() < deadline, "no window titled {title:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let dir = lrbc_inspector::ui::settings::default_recordings_dir();
    let ours = || -> Vec<PathBuf> {
        std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name()
                            .is_some_and(|n| n.to_string_lossy().contains(&run.name))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let deadline = Instant::now() + DEADLINE;
    while ours()
        .iter()
        .all(|p| std::fs::metadata(p).map_or(0, |m| m.len()) < 64 * 1024)
    {
        assert!(Instant::now() < deadline, "nothing recorded in {dir:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    window.ctrl_c();
    assert_eq!(window.exit_code(), 0, "Ctrl-C closes the window cleanly");
    let files = ours();
    assert_eq!(files.len(), 1, "{files:?}");
    let (code, info, err) = run_inspector(&["open", files[0].to_str().unwrap(), "--info"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        info.contains("finished") && !info.contains("not finished"),
        "{info}"
    );
    let _ = std::fs::remove_file(&files[0]);
}
