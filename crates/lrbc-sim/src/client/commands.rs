//! The client's commands: the requests it sends on the command ring (at the start, and a
//! realistic mix with its steps) and the responses it consumes.

use super::Client;
use ::lrbc::clock::monotonic_now_ns;
use ::lrbc::layout;
use ::lrbc::rings::{LuckyEntryHeader, lucky, v1};
use ::lrbc::rpc::{self, fb};

/// The command rings of the segment's layout: this side's producer and consumer.
pub(super) enum CmdRings {
    Lrbc {
        out: v1::V1Producer,
        inbound: v1::V1Consumer,
    },
    Lucky {
        out: lucky::LuckyProducer,
        inbound: lucky::LuckyConsumer,
    },
}

impl Client<'_> {
    /// Pushes one request on the command ring (counted if the ring took it).
    fn send(
        &mut self,
        method: fb::MethodId,
        build: &dyn Fn(&mut flatbuffers::FlatBufferBuilder<'_>) -> rpc::BuiltPayload,
    ) {
        self.correlation_id += 1;
        let correlation_id = self.correlation_id;
        let seg = self.seg;
        let ok = match &mut self.rings {
            CmdRings::Lrbc { out, .. } => {
                let bytes =
                    rpc::build_envelope(correlation_id, method, None, monotonic_now_ns(), build);
                out.try_push(seg, &bytes).is_ok()
            }
            CmdRings::Lucky { out, .. } => {
                // The luckyrobots layout speaks JSON and only knows ResetAgent and
                // SetSimulationMode.
                let (id, body) = match method {
                    fb::MethodId::ResetAgent => (
                        1,
                        r#"{"agent_name": "cartpole", "simulation_contract": {"joint_position_noise": 0.01}}"#,
                    ),
                    fb::MethodId::SetSimulationMode => (2, r#"{"mode": "fast"}"#),
                    _ => return,
                };
                let h = LuckyEntryHeader {
                    correlation_id: correlation_id as u32,
                    method_or_status: id,
                    payload_length: 0,
                };
                out.try_push(seg, h, body.as_bytes()).is_ok()
            }
        };
        if ok {
            self.stats.requests += 1;
        }
    }

    /// The requests sent once at the start: the schema, the simulation mode, the
    /// telemetry stream and, if the segment has images, a camera stream.
    pub(super) fn send_opening_requests(&mut self, image: Option<layout::ImageGeometry>) {
        self.send(fb::MethodId::GetAgentSchema, &|fbb| {
            let name = fbb.create_string("cartpole");
            let req = fb::GetAgentSchemaReq::create(
                fbb,
                &fb::GetAgentSchemaReqArgs {
                    agent_name: Some(name),
                },
            );
            Some((fb::Payload::GetAgentSchemaReq, req.as_union_value()))
        });
        self.send(fb::MethodId::SetSimulationMode, &|fbb| {
            let req = fb::SetSimulationModeReq::create(
                fbb,
                &fb::SetSimulationModeReqArgs {
                    mode: fb::SimulationMode::SIMULATION_MODE_FAST,
                },
            );
            Some((fb::Payload::SetSimulationModeReq, req.as_union_value()))
        });
        self.send(fb::MethodId::TelemetryStream, &|fbb| {
            let req =
                fb::TelemetryStreamReq::create(fbb, &fb::TelemetryStreamReqArgs { target_fps: 10 });
            Some((fb::Payload::TelemetryStreamReq, req.as_union_value()))
        });
        if let Some(img) = image {
            let format = if img.width * img.height > 128 * 128 {
                fb::ImageFormat::Jpeg
            } else {
                fb::ImageFormat::Raw
            };
            self.send(fb::MethodId::CameraStream, &|fbb| {
                let name = fbb.create_string("env0/camera");
                let req = fb::CameraStreamReq::create(
                    fbb,
                    &fb::CameraStreamReqArgs {
                        id: Some(&fb::EntityId::new(1000)),
                        name: Some(name),
                        target_fps: 5,
                        width: img.width,
                        height: img.height,
                        format,
                    },
                );
                Some((fb::Payload::CameraStreamReq, req.as_union_value()))
            });
        }
    }

    /// The requests of this step: a ResetAgent when env 0 starts an episode, a debug
    /// draw and a joint-state query now and then.
    pub(super) fn send_step_requests(&mut self) {
        if self.resets.first() == Some(&1) {
            // A new episode of env 0: a ResetAgent with a simulation contract.
            self.send(fb::MethodId::ResetAgent, &|fbb| {
                let name = fbb.create_string("cartpole");
                let friction = fbb.create_vector(&[0.8f32, 1.2]);
                let mass = fbb.create_vector(&[0.9f32, 1.1]);
                let terrain = fbb.create_string("flat");
                let contract = fb::SimulationContract::create(
                    fbb,
                    &fb::SimulationContractArgs {
                        joint_position_noise: 0.01,
                        joint_velocity_noise: 0.02,
                        friction_range: Some(friction),
                        mass_scale_range: Some(mass),
                        terrain_type: Some(terrain),
                        ..Default::default()
                    },
                );
                let req = fb::ResetAgentReq::create(
                    fbb,
                    &fb::ResetAgentReqArgs {
                        agent_name: Some(name),
                        simulation_contract: Some(contract),
                    },
                );
                Some((fb::Payload::ResetAgentReq, req.as_union_value()))
            });
        }
        if self.stats.steps % 250 == 100 {
            self.send(fb::MethodId::DebugDraw, &|fbb| {
                let line = fb::DebugLine::create(
                    fbb,
                    &fb::DebugLineArgs {
                        start: Some(&fb::Vec3::new(0.0, 0.0, 0.0)),
                        end: Some(&fb::Vec3::new(0.0, 1.0, 0.0)),
                        color: Some(&fb::Color::new(1.0, 0.5, 0.0, 1.0)),
                    },
                );
                let lines = fbb.create_vector(&[line]);
                let req = fb::DebugDrawReq::create(
                    fbb,
                    &fb::DebugDrawReqArgs {
                        lines: Some(lines),
                        clear_previous: true,
                        ..Default::default()
                    },
                );
                Some((fb::Payload::DebugDrawReq, req.as_union_value()))
            });
        }
        if self.stats.steps % 500 == 250 {
            self.send(fb::MethodId::GetJointState, &|fbb| {
                let name = fbb.create_string("cartpole");
                let req = fb::GetJointStateReq::create(
                    fbb,
                    &fb::GetJointStateReqArgs {
                        robot_name: Some(name),
                    },
                );
                Some((fb::Payload::GetJointStateReq, req.as_union_value()))
            });
        }
    }

    /// Consumes the responses and stream frames waiting on the command ring.
    pub(super) fn drain_responses(&mut self) {
        loop {
            let got = match &mut self.rings {
                CmdRings::Lrbc { inbound, .. } => match inbound.try_pop(self.seg, &mut self.buf) {
                    Ok(Some(_)) => Some(
                        rpc::decode_envelope(&self.buf)
                            .map(|d| d.error.is_some())
                            .unwrap_or(true),
                    ),
                    _ => None,
                },
                CmdRings::Lucky { inbound, .. } => match inbound.try_pop(self.seg, &mut self.buf) {
                    Ok(Some(h)) => Some(h.method_or_status != 0),
                    _ => None,
                },
            };
            match got {
                Some(error) => {
                    self.stats.responses += 1;
                    self.stats.error_responses += u64::from(error);
                }
                None => break,
            }
        }
    }
}
