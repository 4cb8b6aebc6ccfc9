//! Helpers for unit tests: real segments (in /dev/shm, or named mappings on Windows),
//! removed on drop.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::attach::Attached;
use crate::layout::plan::{Plan, PlanLayout, PlanSpec};
use crate::layout::{LayoutChoice, Names};
use crate::segment::{Location, SegmentRw};

/// A segment created by this process, unlinked when dropped.
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

    pub fn attach(&self) -> Attached {
        Attached::open_at(&self.location, Some(self.name.clone()), LayoutChoice::Auto)
            .expect("attach")
    }
}
