//! Fixtures of the benchmarks (`cargo bench`, `bench ring`): sample envelopes of the
//! kinds that dominate real traffic, and a segment with one command ring.

use std::sync::Arc;

use lrbc::layout::Names;
use lrbc::layout::plan::{Plan, PlanLayout, PlanSpec};
use lrbc::rpc::{self, fb};
use lrbc::segment::{Location, SegmentRw};

/// Small envelopes of the kinds that dominate real traffic.
pub fn sample_envelopes() -> Vec<(&'static str, Vec<u8>)> {
    let joint_req = rpc::build_envelope(42, fb::MethodId::GetJointState, None, 123_456, |fbb| {
        let name = fbb.create_string("robot");
        let req = fb::GetJointStateReq::create(
            fbb,
            &fb::GetJointStateReqArgs {
                robot_name: Some(name),
            },
        );
        Some((fb::Payload::GetJointStateReq, req.as_union_value()))
    });
    let toggle = rpc::build_envelope(7, fb::MethodId::SetServiceEnabled, None, 1, |fbb| {
        let resp = fb::SetServiceEnabledResp::create(
            fbb,
            &fb::SetServiceEnabledRespArgs {
                service: fb::ServiceId::Camera,
                enabled: true,
            },
        );
        Some((fb::Payload::SetServiceEnabledResp, resp.as_union_value()))
    });
    let telemetry = rpc::build_envelope(9, fb::MethodId::TelemetryFrame, None, 5, |fbb| {
        let q = fbb.create_vector(&[0.1f32, 0.2, 0.3, 0.4]);
        let c = fbb.create_vector(&[0.5f32, -0.5]);
        let f = fb::TelemetryFrame::create(
            fbb,
            &fb::TelemetryFrameArgs {
                timestamp_ms: 1000,
                frame_number: 12,
                task_index: 0,
                observation_qpos: Some(q),
                action_ctrl: Some(c),
            },
        );
        Some((fb::Payload::TelemetryFrame, f.as_union_value()))
    });
    vec![
        ("GetJointStateReq", joint_req),
        ("SetServiceEnabledResp", toggle),
        ("TelemetryFrame", telemetry),
    ]
}

/// A segment of one env whose command rings have `ring_bytes` of data each, created
/// in `/dev/shm` (or as a named mapping) and removed when dropped.
#[derive(Debug)]
pub struct RingSegment {
    pub name: String,
    pub location: Location,
    pub rw: Arc<SegmentRw>,
}

/// A ring segment that could not be made, as one line.
#[derive(Debug, thiserror::Error)]
pub enum RingSegmentError {
    #[error(transparent)]
    Plan(#[from] lrbc::layout::plan::PlanError),
    #[error(transparent)]
    Create(#[from] lrbc::segment::OpenError),
}

impl RingSegment {
    pub fn create(name: &str, ring_bytes: u32) -> Result<Self, RingSegmentError> {
        let spec = PlanSpec {
            layout: PlanLayout::Lrbc { ext: true },
            num_envs: 1,
            obs_size: 1,
            act_size: 1,
            image: None,
            cmd_ring_size: ring_bytes,
            ctl_ring_size: None,
            names: Names::default(),
            mode: 0,
            server_pid: std::process::id(),
            max_size_bytes: u64::MAX,
        };
        let plan = Plan::new(&spec)?;
        let location = Location::shm(name);
        let rw = SegmentRw::create_at(&location, plan.size_bytes, true)?;
        rw.write_at(0, &plan.initial_bytes(&spec));
        Ok(Self {
            name: name.to_string(),
            location,
            rw: Arc::new(rw),
        })
    }
}

impl Drop for RingSegment {
    fn drop(&mut self) {
        self.location.remove_file();
    }
}
