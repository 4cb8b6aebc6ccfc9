//! The Windows program as its users meet it, under Wine in CI (`.ci/windows`) with the
//! environment a Windows machine gives (no `DISPLAY`, `HOME`, `XDG_*`: `.ci/wine/winenv.c`
//! removes them; Wine's X11 driver still draws on the X server of the Unix side):
//! a GUI-subsystem `.exe` with an icon and version information, whose window opens on a
//! segment and in `demo`, and whose command line prints to the console it was started
//! from, with its exit codes.
//!
//! `LRBC_UPDATE_SCREENSHOTS=1` writes the windows' pictures into `screenshots/`
//! (`bash .ci/wine/screenshot`); otherwise into `target/wine/`.

#![cfg(windows)]
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]
#![allow(
    unsafe_code,
    reason = "the Win32 calls that look at windows and resources"
)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::served::Serve;
use common::win32 as win;
use common::*;

fn exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_lrbc-inspector"))
}

/// The PE optional header's subsystem field (2: Windows GUI, 3: Windows console).
fn pe_subsystem(exe: &Path) -> u16 {
    let bytes = std::fs::read(exe).unwrap();
    let at = |o: usize, n: usize| &bytes[o..o + n];
    let pe = u32::from_le_bytes(at(0x3c, 4).try_into().unwrap()) as usize;
    assert_eq!(at(pe, 4), b"PE\0\0", "a PE image");
    // The optional header follows the 4-byte signature and the 20-byte file header.
    u16::from_le_bytes(at(pe + 24 + 68, 2).try_into().unwrap())
}

/// Where the windows' pictures go.
fn picture_path(name: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = if std::env::var_os("LRBC_UPDATE_SCREENSHOTS").is_some() {
        root.join("screenshots")
    } else {
        root.join("target/wine")
    };
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// The visible window of `child` titled `title`, once it is mapped.
fn wait_for_window(child: &mut Child, title: &str) -> windows_sys::Win32::Foundation::HWND {
    let deadline = Instant::now() + DEADLINE * 2;
    loop {
        let windows = win::windows_of(child.id());
        if let Some((hwnd, _)) = windows.iter().find(|(_, t)| t == title) {
            return *hwnd;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("the process exited ({status}) before a window titled {title:?} showed");
        }
        assert!(
            Instant::now() < deadline,
            "no window titled {title:?}; its windows: {windows:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The X server's screen as Xvfb keeps it (`-fbdir`, an XWD file; `.ci/windows` starts
/// it so): what the user would see, OpenGL content included.
fn xvfb_screen() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/wine/xvfb/Xvfb_screen0")
}

/// The part of the screen at (x, y, w, h), from an XWD file of 32-bit pixels.
fn screen_part(xwd: &[u8], (x, y, w, h): (i32, i32, i32, i32)) -> image::RgbaImage {
    let field = |i: usize| u32::from_be_bytes(xwd[i * 4..i * 4 + 4].try_into().unwrap()) as usize;
    let (header, width, height) = (field(0), field(4), field(5));
    let (bits, line, colours) = (field(11), field(12), field(19));
    assert_eq!(bits, 32, "a 32-bit screen");
    let start = header + colours * 12;
    let x0 = x.clamp(0, width as i32) as usize;
    let y0 = y.clamp(0, height as i32) as usize;
    let x1 = (x + w).clamp(0, width as i32) as usize;
    let y1 = (y + h).clamp(0, height as i32) as usize;
    let mut img = image::RgbaImage::new((x1 - x0).max(1) as u32, (y1 - y0).max(1) as u32);
    for row in y0..y1 {
        for col in x0..x1 {
            let p = start + row * line + col * 4;
            let [b, g, r] = [xwd[p], xwd[p + 1], xwd[p + 2]];
            img.put_pixel(
                (col - x0) as u32,
                (row - y0) as u32,
                image::Rgba([r, g, b, 255]),
            );
        }
    }
    img
}

/// For the pictures kept in `screenshots/`: waits until the run on `segment` has 10 s
/// of history (2,000 frames at 200 Hz) to show. Nothing to wait for otherwise.
fn settle_for_picture(segment: &str) {
    if std::env::var_os("LRBC_UPDATE_SCREENSHOTS").is_none() {
        return;
    }
    let deadline = Instant::now() + DEADLINE * 2;
    loop {
        let (_, out, _) = run_inspector(&["dump", "--shm", segment, "--json"]);
        let seq = serde_json::from_str::<serde_json::Value>(&out)
            .ok()
            .and_then(|v| v["snapshot"]["frame_seq"].as_u64())
            .unwrap_or(0);
        if seq >= 2_000 {
            return;
        }
        assert!(Instant::now() < deadline, "the run stalled at frame {seq}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The window's picture once it shows its panels drawn (many colours: plots, text and
/// images, not a blank or half-drawn surface), written to `screenshots/NAME`.
fn picture_of_drawn_window(hwnd: windows_sys::Win32::Foundation::HWND, name: &str) {
    let screen = xvfb_screen();
    let deadline = Instant::now() + DEADLINE * 2;
    loop {
        let xwd = std::fs::read(&screen).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run the tests through .ci/windows, which starts Xvfb with -fbdir)",
                screen.display()
            )
        });
        let img = screen_part(&xwd, win::rect(hwnd));
        let colours: std::collections::HashSet<[u8; 4]> = img.pixels().map(|p| p.0).collect();
        if colours.len() >= 400 {
            img.save(picture_path(name)).unwrap();
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the window never showed its panels ({} colours)",
            colours.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
fn the_tests_and_what_they_start_have_a_windows_environment() {
    for var in [
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "WAYLAND_SOCKET",
        "HOME",
        "XDG_RUNTIME_DIR",
    ] {
        assert!(
            std::env::var_os(var).is_none(),
            "{var} is in the Win32 environment: run the tests through .ci/wine/run"
        );
    }
    let out = std::process::Command::new("cmd")
        .args(["/c", "set"])
        .output()
        .unwrap();
    let env = String::from_utf8_lossy(&out.stdout);
    assert!(env.contains("USERPROFILE="), "{env}");
    assert!(
        !env.lines().any(|l| l.starts_with("DISPLAY=")),
        "a child has DISPLAY"
    );
}

#[test]
fn the_exe_is_a_gui_program_with_an_icon_and_version_information() {
    let exe = exe();
    assert_eq!(pe_subsystem(&exe), 2, "IMAGE_SUBSYSTEM_WINDOWS_GUI");
    assert!(win::icon_count(&exe) >= 1, "the exe carries an icon");
    assert_eq!(
        win::version_string(&exe, "ProductName").as_deref(),
        Some("lrbc-inspector")
    );
    let version = win::version_string(&exe, "ProductVersion").expect("ProductVersion");
    assert!(
        version.starts_with(env!("CARGO_PKG_VERSION")),
        "{version} is Cargo.toml's {}",
        env!("CARGO_PKG_VERSION")
    );
}

#[test]
fn the_command_line_of_the_gui_exe_prints_and_keeps_its_exit_codes() {
    let (code, out, _) = run_inspector(&["--help"]);
    assert_eq!(code, 0);
    assert!(out.contains("Usage:"), "{out}");
    let (code, out, _) = run_inspector(&["list", "--json"]);
    assert_eq!(code, 0);
    assert!(
        serde_json::from_str::<serde_json::Value>(&out).is_ok_and(|v| v.is_array()),
        "{out}"
    );
    let (code, _, err) = run_inspector(&["dump", "--shm", "no-such-segment-here"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("error: "), "{err}");
    let (code, _, err) = run_inspector(&["watch", "--interval", "-1"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn the_window_opens_on_a_segment_with_no_display_variable_and_closes_cleanly() {
    let run = win::Run::start();
    let mut window = Guarded::new(
        inspector()
            .args(["--shm", &run.name])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let title = format!("lrbc-inspector — {}", run.name);
    let hwnd = wait_for_window(window.child(), &title);
    settle_for_picture(&run.name);
    picture_of_drawn_window(hwnd, "windows-wine.png");
    win::close(hwnd);
    window.finish_cleanly();
}

#[test]
fn connect_opens_the_window_on_a_served_run_named_by_its_server() {
    let run = win::Run::start();
    let serve = Serve::start(&run.name, &[]);
    let addr = serve.url.trim_start_matches("ws://").to_string();
    let mut window = Guarded::new(
        inspector()
            .args(["--connect", &serve.url])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let hwnd = wait_for_window(window.child(), &format!("lrbc-inspector — {addr} (served)"));
    win::close(hwnd);
    window.finish_cleanly();
}

#[test]
fn demo_opens_the_window_and_stops_its_engine_and_trainer_when_it_closes() {
    let mut demo = Guarded::new(
        inspector()
            .args(["demo", "--preset", "cams64"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let lines = line_channel(demo.child().stderr.take().unwrap());
    // The engine and client print to the same stderr: demo's own lines start "demo:".
    let demo_line = |what: &str| loop {
        let line = next_line(&lines, what);
        if line.starts_with("demo: ") {
            break line;
        }
    };
    let first = demo_line("demo's first line");
    // "demo: engine pid E, client pid C at H Hz, segment NAME; ..."
    let pid_after = |what: &str| -> u32 {
        let rest = &first[first.find(what).unwrap_or_else(|| panic!("{first}")) + what.len()..];
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (engine, client) = (pid_after("engine pid "), pid_after("client pid "));
    let name = format!("LuckyEngine_{}", demo.child().id());
    assert!(first.contains(&name), "{first}");
    let opening = demo_line("demo opening the window");
    assert!(
        opening.contains("opening the inspector window"),
        "{opening}"
    );

    let hwnd = wait_for_window(demo.child(), &format!("lrbc-inspector — {name}"));
    settle_for_picture(&name);
    picture_of_drawn_window(hwnd, "windows-wine-demo.png");
    assert!(win::running(engine) && win::running(client));
    win::close(hwnd);
    assert_eq!(demo.finish().status.code(), Some(0));
    assert!(!win::running(engine), "the engine is stopped");
    assert!(!win::running(client), "the client is stopped");
    let (code, _, err) = run_inspector(&["dump", "--shm", &name]);
    assert_eq!(code, 1, "the segment is gone with its engine: {err}");
}
