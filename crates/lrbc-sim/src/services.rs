//! The simulated engine's RPC handlers: every request of the schema gets a response,
//! service toggles are honoured (a disabled service answers with an error), streams
//! send their frames, and per-service counters feed GetServiceStatus.

use flatbuffers::{FlatBufferBuilder, WIPOffset};

use super::dynamics::CartPoles;
use lrbc::rpc::services::{self, COUNT as SERVICES};
use lrbc::rpc::{self, DecodedEnvelope, fb, schema::schema, tree::NodeValue};

/// The state the handlers read.
#[derive(Debug)]
pub struct World<'a> {
    pub sim: &'a CartPoles,
    pub obs_names: &'a [String],
    pub act_names: &'a [String],
    pub actions: &'a [f32],
    /// `(width, height, channels)` of the image region.
    pub image: Option<(u32, u32, u32)>,
    /// The last rendered images of all envs.
    pub images: &'a [u8],
    pub step: u64,
    pub now_ns: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StreamKind {
    Telemetry,
    Camera { env: u32, format: fb::ImageFormat },
    Viewport,
}

#[derive(Clone, Debug)]
struct Stream {
    correlation_id: u64,
    kind: StreamKind,
    interval_ns: u64,
    next_ns: u64,
    frames: u32,
}

/// Service state and counters.
#[derive(Clone, Debug)]
pub struct Services {
    pub enabled: [bool; SERVICES],
    pub requests: [u64; SERVICES],
    pub errors: [u64; SERVICES],
    streams: Vec<Stream>,
    simulation_mode: fb::SimulationMode,
}

impl Default for Services {
    fn default() -> Self {
        Self {
            enabled: [true; SERVICES],
            requests: [0; SERVICES],
            errors: [0; SERVICES],
            streams: Vec::new(),
            simulation_mode: fb::SimulationMode::SIMULATION_MODE_FAST,
        }
    }
}

/// The service a method belongs to (method ids come in blocks of 100 per service);
/// `None` for service control (900..), which is always available.
pub fn service_of(method: u16) -> Option<u8> {
    match method {
        100..=799 => Some((method / 100 - 1) as u8),
        _ => None,
    }
}

fn payload_index(name: &str) -> Option<u8> {
    schema()
        .ok()?
        .enum_named("Payload")?
        .value_of(name)
        .and_then(|v| u8::try_from(v).ok())
}

fn strings<'b>(
    fbb: &mut FlatBufferBuilder<'b>,
    list: &[String],
) -> WIPOffset<flatbuffers::Vector<'b, flatbuffers::ForwardsUOffset<&'b str>>> {
    let offsets: Vec<_> = list.iter().map(|s| fbb.create_string(s)).collect();
    fbb.create_vector(&offsets)
}

fn field<'t>(d: &'t DecodedEnvelope, name: &str) -> Option<&'t NodeValue> {
    d.tree
        .nodes
        .iter()
        .find(|n| n.name == name)
        .map(|n| &n.value)
}

fn uint_field(d: &DecodedEnvelope, name: &str) -> Option<u64> {
    match field(d, name)? {
        NodeValue::UInt(v) => Some(*v),
        NodeValue::Enum { value, .. } => u64::try_from(*value).ok(),
        _ => None,
    }
}

fn ms(now_ns: u64) -> u64 {
    now_ns / 1_000_000
}

impl Services {
    /// `service_flags`: bit i set = service i enabled.
    pub fn flags(&self) -> u32 {
        self.enabled
            .iter()
            .enumerate()
            .fold(0, |acc, (i, &e)| acc | (u32::from(e) << i))
    }

    pub fn camera_enabled(&self) -> bool {
        self.enabled[4]
    }

    fn respond(
        d: &DecodedEnvelope,
        now_ns: u64,
        error: Option<&str>,
        payload: impl FnOnce(&mut FlatBufferBuilder<'_>) -> rpc::BuiltPayload,
    ) -> Vec<u8> {
        rpc::build_envelope(
            d.correlation_id,
            fb::MethodId(d.method),
            error,
            now_ns,
            payload,
        )
    }

    /// Answers one request. `None` when the bytes are not an envelope (nothing to
    /// answer to).
    pub fn handle(&mut self, request: &[u8], w: &World<'_>) -> Option<Vec<u8>> {
        let d = rpc::decode_envelope(request).ok()?;
        if let Some(refusal) = self.count_request(&d, w) {
            return Some(refusal);
        }
        let name = d.method_name.unwrap_or("");
        let response = match name {
            "SetServiceEnabled" => self.set_service_enabled(&d, w),
            "GetServiceStatus" => self.service_status(&d, w),
            "GetAgentSchema" => agent_schema(&d, w),
            "ResetAgent" => reset_agent(&d, w),
            "GetJointState" => joint_state(&d, w),
            "GetMujocoInfo" => mujoco_info(&d, w),
            "TelemetryGetSchema" => telemetry_schema(&d, w),
            "SceneGetInfo" => scene_info(&d, w),
            "GetSimulationMode" => self.simulation_mode(&d, w),
            "SetSimulationMode" => self.set_simulation_mode(&d, w),
            "CameraList" => camera_list(&d, w),
            "TelemetryStream" | "CameraStream" | "ViewportStream" => {
                self.start_stream(&d, name, request, w)
            }
            "DebugDraw" => Self::respond(&d, w.now_ns, None, |fbb| {
                let resp = fb::DebugDrawResp::create(fbb, &fb::DebugDrawRespArgs { success: true });
                Some((fb::Payload::DebugDrawResp, resp.as_union_value()))
            }),
            _ => self.generic_response(&d, w.now_ns),
        };
        Some(response)
    }

    /// Counts the request against its service; the error response if the service is
    /// disabled.
    fn count_request(&mut self, d: &DecodedEnvelope, w: &World<'_>) -> Option<Vec<u8>> {
        let s = service_of(d.method)
            .map(usize::from)
            .filter(|&s| s < SERVICES)?;
        self.requests[s] += 1;
        if self.enabled[s] {
            return None;
        }
        self.errors[s] += 1;
        let msg = format!("service {} is disabled", services::label(s as u8));
        Some(Self::respond(d, w.now_ns, Some(&msg), |_| None))
    }

    fn simulation_mode(&self, d: &DecodedEnvelope, w: &World<'_>) -> Vec<u8> {
        Self::respond(d, w.now_ns, None, |fbb| {
            let resp = fb::GetSimulationModeResp::create(
                fbb,
                &fb::GetSimulationModeRespArgs {
                    mode: self.simulation_mode,
                },
            );
            Some((fb::Payload::GetSimulationModeResp, resp.as_union_value()))
        })
    }

    fn set_simulation_mode(&mut self, d: &DecodedEnvelope, w: &World<'_>) -> Vec<u8> {
        if let Some(m) = uint_field(d, "mode") {
            self.simulation_mode = fb::SimulationMode(m as i32);
        }
        let mode = self.simulation_mode;
        Self::respond(d, w.now_ns, None, |fbb| {
            let resp = fb::SetSimulationModeResp::create(
                fbb,
                &fb::SetSimulationModeRespArgs {
                    success: true,
                    message: None,
                    current_mode: mode,
                },
            );
            Some((fb::Payload::SetSimulationModeResp, resp.as_union_value()))
        })
    }

    /// Starts (or restarts) a telemetry, camera or viewport stream; an error if it
    /// wants images and this engine renders none.
    fn start_stream(
        &mut self,
        d: &DecodedEnvelope,
        name: &str,
        request: &[u8],
        w: &World<'_>,
    ) -> Vec<u8> {
        let fps = uint_field(d, "target_fps")
            .filter(|&f| f > 0)
            .unwrap_or(10)
            .min(60);
        let kind = match name {
            "TelemetryStream" => StreamKind::Telemetry,
            "CameraStream" => StreamKind::Camera {
                env: camera_env(d, request),
                format: fb::ImageFormat(uint_field(d, "format").unwrap_or(0) as u8),
            },
            _ => StreamKind::Viewport,
        };
        if matches!(kind, StreamKind::Camera { .. } | StreamKind::Viewport) && w.image.is_none() {
            return Self::respond(d, w.now_ns, Some("this engine renders no images"), |_| None);
        }
        self.streams.retain(|s| s.kind != kind);
        self.streams.push(Stream {
            correlation_id: d.correlation_id,
            kind,
            interval_ns: 1_000_000_000 / fps,
            next_ns: w.now_ns,
            frames: 0,
        });
        Self::respond(d, w.now_ns, None, |_| None)
    }

    /// A valid response of the right type with no fields set, for the methods this
    /// engine has nothing to say about: `XReq` is answered with an empty `XResp`, the
    /// policy commands with `PolicyOperationAck`, anything else with no payload.
    fn generic_response(&self, d: &DecodedEnvelope, now_ns: u64) -> Vec<u8> {
        let resp_name = d.payload_type.and_then(|req| {
            let base = req.strip_suffix("Req")?;
            let resp = format!("{base}Resp");
            payload_index(&resp).map(|_| resp).or_else(|| {
                payload_index("PolicyOperationAck")
                    .filter(|_| base.starts_with(['S', 'C', 'F']))
                    .map(|_| "PolicyOperationAck".to_string())
            })
        });
        Self::respond(d, now_ns, None, |fbb| {
            let index = payload_index(resp_name.as_deref()?)?;
            let start = fbb.start_table();
            let table = fbb.end_table(start);
            Some((fb::Payload(index), table.as_union_value()))
        })
    }

    fn set_service_enabled(&mut self, d: &DecodedEnvelope, w: &World<'_>) -> Vec<u8> {
        let service = uint_field(d, "service").unwrap_or(u64::MAX);
        let enabled = matches!(field(d, "enabled"), Some(NodeValue::Bool(true)));
        let Some(slot) = usize::try_from(service).ok().filter(|&s| s < SERVICES) else {
            return Self::respond(
                d,
                w.now_ns,
                Some(&format!("unknown service {service}")),
                |_| None,
            );
        };
        self.enabled[slot] = enabled;
        if !enabled {
            self.streams.retain(|s| {
                !matches!(
                    (slot, s.kind),
                    (2, StreamKind::Telemetry)
                        | (4, StreamKind::Camera { .. })
                        | (5, StreamKind::Viewport)
                )
            });
        }
        Self::respond(d, w.now_ns, None, |fbb| {
            let resp = fb::SetServiceEnabledResp::create(
                fbb,
                &fb::SetServiceEnabledRespArgs {
                    service: fb::ServiceId(slot as u8),
                    enabled,
                },
            );
            Some((fb::Payload::SetServiceEnabledResp, resp.as_union_value()))
        })
    }

    fn service_status(&self, d: &DecodedEnvelope, w: &World<'_>) -> Vec<u8> {
        Self::respond(d, w.now_ns, None, |fbb| {
            let statuses: Vec<_> = (0..SERVICES)
                .map(|i| {
                    fb::ServiceStatus::create(
                        fbb,
                        &fb::ServiceStatusArgs {
                            service: fb::ServiceId(i as u8),
                            enabled: self.enabled[i],
                            requests: self.requests[i],
                            errors: self.errors[i],
                        },
                    )
                })
                .collect();
            let services = fbb.create_vector(&statuses);
            let resp = fb::GetServiceStatusResp::create(
                fbb,
                &fb::GetServiceStatusRespArgs {
                    services: Some(services),
                },
            );
            Some((fb::Payload::GetServiceStatusResp, resp.as_union_value()))
        })
    }

    /// Frames of the active streams that are due.
    pub fn stream_frames(&mut self, w: &World<'_>, out: &mut Vec<Vec<u8>>) {
        for s in &mut self.streams {
            if w.now_ns < s.next_ns {
                continue;
            }
            s.next_ns = w.now_ns.max(s.next_ns) + s.interval_ns;
            s.frames += 1;
            let (corr, frame) = (s.correlation_id, s.frames);
            let bytes = match s.kind {
                StreamKind::Telemetry => {
                    rpc::build_envelope(corr, fb::MethodId::TelemetryFrame, None, w.now_ns, |fbb| {
                        let qpos = fbb.create_vector(&[w.sim.x[0], w.sim.theta[0]]);
                        let act = &w.actions[..w.sim.act_size.min(w.actions.len())];
                        let ctrl = fbb.create_vector(act);
                        let f = fb::TelemetryFrame::create(
                            fbb,
                            &fb::TelemetryFrameArgs {
                                timestamp_ms: ms(w.now_ns),
                                frame_number: frame,
                                task_index: 0,
                                observation_qpos: Some(qpos),
                                action_ctrl: Some(ctrl),
                            },
                        );
                        Some((fb::Payload::TelemetryFrame, f.as_union_value()))
                    })
                }
                StreamKind::Camera { env, format } => {
                    let Some((iw, ih, ic)) = w.image else {
                        continue;
                    };
                    let per = (iw * ih * ic) as usize;
                    let env = (env as usize).min(w.sim.num_envs.saturating_sub(1));
                    let Some(pixels) = w.images.get(env * per..(env + 1) * per) else {
                        continue;
                    };
                    let (data, format) = encode(pixels, iw, ih, ic, format);
                    rpc::build_envelope(corr, fb::MethodId::CameraFrame, None, w.now_ns, |fbb| {
                        let data = fbb.create_vector(&data);
                        let name = fbb.create_string(&format!("env{env}/camera"));
                        let f = fb::CameraImageFrame::create(
                            fbb,
                            &fb::CameraImageFrameArgs {
                                camera_id: Some(&fb::EntityId::new(1000 + env as u64)),
                                camera_name: Some(name),
                                env_index: env as u32,
                                width: iw,
                                height: ih,
                                channels: ic,
                                format,
                                timestamp_ms: ms(w.now_ns),
                                frame_number: frame,
                                depth_scale: 0.0,
                                data: Some(data),
                            },
                        );
                        Some((fb::Payload::CameraImageFrame, f.as_union_value()))
                    })
                }
                StreamKind::Viewport => {
                    let Some((iw, ih, ic)) = w.image else {
                        continue;
                    };
                    let per = (iw * ih * ic) as usize;
                    let Some(pixels) = w.images.get(..per) else {
                        continue;
                    };
                    let (data, format) = encode(pixels, iw, ih, ic, fb::ImageFormat::Png);
                    rpc::build_envelope(corr, fb::MethodId::ViewportFrame, None, w.now_ns, |fbb| {
                        let data = fbb.create_vector(&data);
                        let name = fbb.create_string("main");
                        let f = fb::ViewportImageFrame::create(
                            fbb,
                            &fb::ViewportImageFrameArgs {
                                viewport_name: Some(name),
                                width: iw,
                                height: ih,
                                channels: ic,
                                format,
                                timestamp_ms: ms(w.now_ns),
                                frame_number: frame,
                                depth_scale: 0.0,
                                data: Some(data),
                            },
                        );
                        Some((fb::Payload::ViewportImageFrame, f.as_union_value()))
                    })
                }
            };
            out.push(bytes);
        }
    }
}

/// The env of a camera stream's request, from its camera's name (`env3/camera`: 3;
/// 0 when there is none).
fn camera_env(d: &DecodedEnvelope, request: &[u8]) -> u32 {
    d.tree
        .nodes
        .iter()
        .find(|n| n.name == "name")
        .and_then(|n| match n.value {
            NodeValue::Str { start, len } => request
                .get(start as usize..(start + len) as usize)
                .and_then(|b| std::str::from_utf8(b).ok())
                .and_then(|s| s.trim_start_matches("env").split('/').next()?.parse().ok()),
            _ => None,
        })
        .unwrap_or(0)
}

fn agent_schema(d: &DecodedEnvelope, w: &World<'_>) -> Vec<u8> {
    Services::respond(d, w.now_ns, None, |fbb| {
        let agent_name = fbb.create_string("cartpole");
        let observation_names = Some(strings(fbb, w.obs_names));
        let action_names = Some(strings(fbb, w.act_names));
        let schema = fb::AgentSchema::create(
            fbb,
            &fb::AgentSchemaArgs {
                agent_name: Some(agent_name),
                observation_names,
                action_names,
                observation_size: w.sim.obs_size as u32,
                action_size: w.sim.act_size as u32,
            },
        );
        let resp = fb::GetAgentSchemaResp::create(
            fbb,
            &fb::GetAgentSchemaRespArgs {
                schema: Some(schema),
            },
        );
        Some((fb::Payload::GetAgentSchemaResp, resp.as_union_value()))
    })
}

fn reset_agent(d: &DecodedEnvelope, w: &World<'_>) -> Vec<u8> {
    Services::respond(d, w.now_ns, None, |fbb| {
        let message = fbb.create_string("contract applied; envs reset on their next reset flag");
        let resp = fb::ResetAgentResp::create(
            fbb,
            &fb::ResetAgentRespArgs {
                success: true,
                message: Some(message),
            },
        );
        Some((fb::Payload::ResetAgentResp, resp.as_union_value()))
    })
}

fn joint_state(d: &DecodedEnvelope, w: &World<'_>) -> Vec<u8> {
    Services::respond(d, w.now_ns, None, |fbb| {
        let positions = fbb.create_vector(&[w.sim.x[0], w.sim.theta[0]]);
        let velocities = fbb.create_vector(&[w.sim.v[0], w.sim.omega[0]]);
        let state = fb::JointState::create(
            fbb,
            &fb::JointStateArgs {
                positions: Some(positions),
                velocities: Some(velocities),
                nq: 2,
                nv: 2,
            },
        );
        let resp = fb::GetJointStateResp::create(
            fbb,
            &fb::GetJointStateRespArgs {
                success: true,
                message: None,
                state: Some(state),
            },
        );
        Some((fb::Payload::GetJointStateResp, resp.as_union_value()))
    })
}

fn mujoco_info(d: &DecodedEnvelope, w: &World<'_>) -> Vec<u8> {
    Services::respond(d, w.now_ns, None, |fbb| {
        let joints = strings(fbb, &["slider".into(), "hinge".into()]);
        let actuators = strings(fbb, &["cart_motor".into()]);
        let resp = fb::GetMujocoInfoResp::create(
            fbb,
            &fb::GetMujocoInfoRespArgs {
                success: true,
                message: None,
                nq: 2,
                nv: 2,
                nu: 1,
                joint_names: Some(joints),
                actuator_names: Some(actuators),
            },
        );
        Some((fb::Payload::GetMujocoInfoResp, resp.as_union_value()))
    })
}

fn telemetry_schema(d: &DecodedEnvelope, w: &World<'_>) -> Vec<u8> {
    Services::respond(d, w.now_ns, None, |fbb| {
        let observation_names = Some(strings(fbb, w.obs_names));
        let action_names = Some(strings(fbb, w.act_names));
        let schema = fb::TelemetrySchema::create(
            fbb,
            &fb::TelemetrySchemaArgs {
                observation_names,
                action_names,
                nq: 2,
                nu: 1,
            },
        );
        let resp = fb::TelemetryGetSchemaResp::create(
            fbb,
            &fb::TelemetryGetSchemaRespArgs {
                schema: Some(schema),
            },
        );
        Some((fb::Payload::TelemetryGetSchemaResp, resp.as_union_value()))
    })
}

fn scene_info(d: &DecodedEnvelope, w: &World<'_>) -> Vec<u8> {
    Services::respond(d, w.now_ns, None, |fbb| {
        let scene_name = fbb.create_string("cartpole_arena");
        let scene_path = fbb.create_string("Scenes/CartPole.hscene");
        let resp = fb::SceneGetInfoResp::create(
            fbb,
            &fb::SceneGetInfoRespArgs {
                scene_name: Some(scene_name),
                scene_path: Some(scene_path),
                entity_count: w.sim.num_envs as u32 * 2,
            },
        );
        Some((fb::Payload::SceneGetInfoResp, resp.as_union_value()))
    })
}

/// One camera per env (at most 16) if the engine renders images.
fn camera_list(d: &DecodedEnvelope, w: &World<'_>) -> Vec<u8> {
    Services::respond(d, w.now_ns, None, |fbb| {
        let count = if w.image.is_some() {
            w.sim.num_envs.min(16)
        } else {
            0
        };
        let cams: Vec<_> = (0..count)
            .map(|i| {
                let name = fbb.create_string(&format!("env{i}/camera"));
                fb::CameraInfo::create(
                    fbb,
                    &fb::CameraInfoArgs {
                        id: Some(&fb::EntityId::new(1000 + i as u64)),
                        name: Some(name),
                    },
                )
            })
            .collect();
        let cameras = fbb.create_vector(&cams);
        let resp = fb::CameraListResp::create(
            fbb,
            &fb::CameraListRespArgs {
                cameras: Some(cameras),
            },
        );
        Some((fb::Payload::CameraListResp, resp.as_union_value()))
    })
}

/// Encodes pixels as asked; falls back to raw when encoding fails.
fn encode(
    pixels: &[u8],
    w: u32,
    h: u32,
    c: u32,
    format: fb::ImageFormat,
) -> (Vec<u8>, fb::ImageFormat) {
    let color = match c {
        1 => image::ExtendedColorType::L8,
        3 => image::ExtendedColorType::Rgb8,
        _ => image::ExtendedColorType::Rgba8,
    };
    let mut out = Vec::new();
    let ok = match format {
        fb::ImageFormat::Png => image::codecs::png::PngEncoder::new(&mut out)
            .write_image(pixels, w, h, color)
            .is_ok(),
        fb::ImageFormat::Jpeg if c != 4 => {
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 85)
                .encode(pixels, w, h, color)
                .is_ok()
        }
        _ => false,
    };
    if ok {
        (out, format)
    } else {
        (pixels.to_vec(), fb::ImageFormat::Raw)
    }
}

use image::ImageEncoder as _;
