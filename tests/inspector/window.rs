//! The real window on Linux, on an X server of the test's own (Xvfb, which the test
//! command installs): it maps with its title and icon, and Ctrl-C (SIGINT) closes it as
//! its close button would: exit 0, settings saved, a recording under way finished.

#![cfg(target_os = "linux")]
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use common::*;

/// An X server for one test (`Xvfb -displayfd`: it picks a free display and says which).
struct Xvfb {
    child: Child,
    display: String,
}

impl Xvfb {
    fn start() -> Self {
        let mut child = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-screen",
                "0",
                "1400x900x24",
                "-nolisten",
                "tcp",
                // A server that resets when its last client leaves refuses connections
                // for a moment: a window opened again just after one closed would fail.
                "-noreset",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb runs (the test command installs the package xvfb)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let n: u32 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("Xvfb printed no display number: {line:?}"));
        let x = Self {
            child,
            display: format!(":{n}"),
        };
        // Until it answers a client: a window started before then fails to connect.
        let deadline = Instant::now() + DEADLINE;
        while !Command::new("xwininfo")
            .args(["-root"])
            .env("DISPLAY", &x.display)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            assert!(
                Instant::now() < deadline,
                "Xvfb {} answers no client",
                x.display
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        x
    }

    /// The X client tools against this server.
    fn tool(&self, program: &str, args: &[&str]) -> String {
        let out = Command::new(program)
            .args(args)
            .env("DISPLAY", &self.display)
            .output()
            .unwrap_or_else(|e| panic!("{program} runs (package x11-utils): {e}"));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The id of the window whose title is `title`, once it is mapped.
    fn wait_for_window(&self, title: &str, inspector: &mut Child) -> String {
        let deadline = Instant::now() + DEADLINE * 2;
        loop {
            let tree = self.tool("xwininfo", &["-root", "-tree"]);
            if let Some(id) = tree
                .lines()
                .find(|l| l.contains(&format!("\"{title}\"")))
                .and_then(|l| l.split_whitespace().next())
            {
                let info = self.tool("xwininfo", &["-id", id]);
                if info.contains("Map State: IsViewable") {
                    return id.to_string();
                }
            }
            if let Ok(Some(status)) = inspector.try_wait() {
                let mut said = String::new();
                if let Some(mut e) = inspector.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut e, &mut said);
                }
                panic!(
                    "the window's process exited ({status}) before {title:?} was mapped: {said}"
                );
            }
            assert!(
                Instant::now() < deadline,
                "no window titled {title:?} was mapped; windows:\n{tree}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The window on `x` with `args`, its user's folders in `home` (as a user of a fresh
/// account has them), rendered by Mesa in software.
fn spawn_window(x: &Xvfb, home: &Path, args: &[&str]) -> Guarded {
    Guarded::new(
        inspector()
            .args(args)
            .env("DISPLAY", &x.display)
            .env("HOME", home)
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_PICTURES_DIR")
            .env_remove("WAYLAND_DISPLAY")
            .env("LIBGL_ALWAYS_SOFTWARE", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

fn recordings(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "mcap"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn ctrl_c_closes_the_window_as_its_close_button_does_settings_saved_and_the_recording_finished() {
    let x = Xvfb::start();
    let engine = SimEngine::start("window", &["--preset", "cams64"]);
    let mut client = sim_client(&engine.name, "200");
    let home = temp_dir("window-home");
    std::fs::create_dir_all(&home).unwrap();
    let mut window = spawn_window(
        &x,
        &home,
        &["--shm", &engine.name, "--record", "--memory-budget", "77"],
    );

    // The title names the segment.
    let id = x.wait_for_window(&format!("lrbc-inspector — {}", engine.name), window.child());
    // The window's icon is the application's (256 px), as the window manager gets it:
    // _NET_WM_ICON starts with the width and height.
    let icon = x.tool(
        "xprop",
        &[
            "-id",
            &id,
            "-len",
            "16",
            "-f",
            "_NET_WM_ICON",
            "32c",
            "=$0+\n",
            "_NET_WM_ICON",
        ],
    );
    assert!(icon.contains("=256, 256"), "{icon}");
    let class = x.tool("xprop", &["-id", &id, "WM_CLASS"]);
    assert!(class.contains("\"lrbc-inspector\""), "{class}");

    // Frames are being recorded (--record) before Ctrl-C.
    let rec_dir = home.join("lrbc-recordings");
    let deadline = Instant::now() + DEADLINE;
    while recordings(&rec_dir)
        .iter()
        .all(|p| std::fs::metadata(p).map_or(0, |m| m.len()) < 64 * 1024)
    {
        assert!(Instant::now() < deadline, "nothing recorded in {rec_dir:?}");
        std::thread::sleep(Duration::from_millis(50));
    }

    let settings = home.join(".local/share/lrbc-inspector/app.ron");
    let before = SystemTime::now();
    interrupt(window.child().id());
    let out = window.finish();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "Ctrl-C is a clean close: {stderr}"
    );

    // Settings saved on the way out (not only by the 10 s autosave).
    let saved = std::fs::read_to_string(&settings).expect("the window saved its settings");
    assert!(saved.contains("memory_budget_mib:77"), "{saved}");
    let modified = std::fs::metadata(&settings).unwrap().modified().unwrap();
    assert!(
        modified >= before,
        "app.ron was written when the window closed"
    );

    // The recording is finished: its summary and footer are there.
    let files = recordings(&rec_dir);
    assert_eq!(files.len(), 1, "{files:?}");
    let (code, info, err) = run_inspector(&["open", files[0].to_str().unwrap(), "--info"]);
    assert_eq!(code, 0, "{err}");
    assert!(info.contains("finished"), "{info}");
    assert!(!info.contains("not finished"), "{info}");

    let _ = client.kill();
    let _ = client.wait();
    drop(engine);
    let _ = std::fs::remove_dir_all(&home);
}

/// Runs the window on `engine` with `args` until it is mapped, then closes it with
/// Ctrl-C; its stderr if it did not close cleanly.
fn open_and_close(x: &Xvfb, engine: &SimEngine, home: &Path, args: &[&str]) {
    let mut window = spawn_window(x, home, &[&["--shm", &engine.name], args].concat());
    x.wait_for_window(&format!("lrbc-inspector — {}", engine.name), window.child());
    interrupt(window.child().id());
    window.finish_cleanly();
}

#[test]
fn a_settings_file_is_a_profile_of_its_own_and_the_users_settings_stay_as_they_were() {
    let x = Xvfb::start();
    let engine = SimEngine::start("window-profile", &["--preset", "cams64"]);
    let home = temp_dir("window-profile-home");
    std::fs::create_dir_all(&home).unwrap();
    let profile = home.join("profile.ron");
    let users = home.join(".local/share/lrbc-inspector/app.ron");

    // The budget given with --settings is kept in that file, not in the user's.
    let file = profile.to_str().unwrap();
    open_and_close(
        &x,
        &engine,
        &home,
        &["--settings", file, "--memory-budget", "77"],
    );
    let kept = std::fs::read_to_string(&profile).expect("the window kept its settings there");
    assert!(kept.contains("memory_budget_mib:77"), "{kept}");
    assert!(
        !users.exists(),
        "the user's settings were written: {users:?}"
    );

    // Opened on the file again without the flag, the window starts from what the file
    // holds (it writes back 77, not the default 128), and still leaves the user's alone.
    open_and_close(&x, &engine, &home, &["--settings", file]);
    let again = std::fs::read_to_string(&profile).unwrap();
    assert!(again.contains("memory_budget_mib:77"), "{again}");
    assert!(
        !users.exists(),
        "the user's settings were written: {users:?}"
    );

    // Without --settings the user's file is the one written.
    open_and_close(&x, &engine, &home, &[]);
    assert!(users.exists(), "the window kept no settings in {users:?}");

    drop(engine);
    let _ = std::fs::remove_dir_all(&home);
}
