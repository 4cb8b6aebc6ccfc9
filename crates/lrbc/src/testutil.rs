//! Helpers for unit tests: real segments (in /dev/shm, or named mappings on Windows),
//! removed on drop. Public (hidden) so that the other crates' unit tests use them too.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::attach::Attached;
use crate::layout::plan::{Plan, PlanLayout, PlanSpec};
use crate::layout::{LayoutChoice, Names};
use crate::segment::{Location, SegmentRw};

/// A segment created by this process, unlinked when dropped.
#[allow(missing_debug_implementations)]
pub struct TestSegment {
    pub name: String,
    pub location: Location,
    pub rw: SegmentRw,
    pub plan: Plan,
}

impl Drop for TestSegment {
    fn drop(&mut self) {
        self.location.remove_file();
    }
}

pub fn spec(layout: PlanLayout, num_envs: u32) -> PlanSpec {
    PlanSpec {
        layout,
        num_envs,
        obs_size: 4,
        act_size: 2,
        image: None,
        cmd_ring_size: 4096,
        ctl_ring_size: (layout == PlanLayout::Lrbc { ext: true }).then_some(4096),
        names: Names::default(),
        mode: 0,
        server_pid: std::process::id(),
        max_size_bytes: 1 << 30,
    }
}

pub fn unique_name(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "lrbc-unit-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

impl TestSegment {
    pub fn create(tag: &str, spec: &PlanSpec) -> Self {
        let name = unique_name(tag);
        let location = Location::shm(&name);
        let plan = Plan::new(spec).expect("valid plan");
        let rw = SegmentRw::create_at(&location, plan.size_bytes, false).expect("create segment");
        assert!(rw.write_at(0, &plan.initial_bytes(spec)));
        Self {
            name,
            location,
            rw,
            plan,
        }
    }

    /// Cuts the segment's file down to its first page (the header stays, the data past
    /// it is gone), as an engine that re-creates its file under readers does.
    #[cfg(unix)]
    pub fn truncate_to_header_page(&self) {
        assert!(
            self.plan.rewards_offset >= 4096,
            "the data lies past the first page"
        );
        let path = self.location.file_path().expect("a file in /dev/shm");
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .expect("open the segment's file");
        file.set_len(4096).expect("truncate the segment's file");
    }

    pub fn attach(&self) -> Attached {
        Attached::open_at(&self.location, Some(self.name.clone()), LayoutChoice::Auto)
            .expect("attach")
    }
}

/// The pid of a process that has exited and been reaped: it names no process.
pub fn dead_pid() -> u32 {
    let mut child = if cfg!(windows) {
        // The test binary itself, asked to run no test.
        let mut c = std::process::Command::new(std::env::current_exe().expect("test binary"));
        c.args(["--exact", "no::such::test", "--quiet"]);
        c
    } else {
        std::process::Command::new("true")
    };
    let mut child = child
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    let pid = child.id();
    child.wait().expect("wait");
    pid
}

/// A process that lives until killed (or for 30 s), and the name the system gives it.
pub fn live_child() -> (std::process::Child, String) {
    let (mut command, name) = if cfg!(windows) {
        // The test binary itself, running the ignored test below.
        let exe = std::env::current_exe().expect("test binary");
        let name = exe
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut c = std::process::Command::new(exe);
        c.args(["--ignored", "--exact", "testutil::sleep_30s", "--quiet"]);
        (c, name)
    } else {
        let mut c = std::process::Command::new("sleep");
        c.arg("30");
        (c, "sleep".to_string())
    };
    let child = command
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    (child, name)
}

#[test]
#[ignore = "a process for other tests to point at (live_child on Windows)"]
fn sleep_30s() {
    std::thread::sleep(std::time::Duration::from_secs(30));
}
