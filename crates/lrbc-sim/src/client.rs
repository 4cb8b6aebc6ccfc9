//! The simulated client (trainer): attaches to a segment, writes actions and reset
//! flags, bumps `action_seq` and waits for `frame_seq` (lock-step), and sends a
//! realistic mix of commands, consuming the responses.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::wait::Waiter;
use ::lrbc::clock::monotonic_now_ns;
use ::lrbc::layout::{self, Geometry, Layout, LayoutChoice, RegionKind};
use ::lrbc::rings::{LuckyEntryHeader, lucky, v1};
use ::lrbc::rpc::{self, fb};
use ::lrbc::segment::{NameError, SegmentRw, shm_location};

/// How actions are chosen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Policy {
    /// Uniform in [-1, 1].
    #[default]
    Random,
    /// All zeros.
    Zero,
    /// A sine per env, phase-shifted by the env index.
    Sine,
    /// A noisy balancing controller reading each env's observations (cart-pole
    /// channels 0..4): episodes last long, as in a policy that has learned something.
    Balance,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClientConfig {
    pub name: String,
    /// Stop after this many steps (else until stopped).
    pub steps: Option<u64>,
    /// Steps per second (else as fast as the engine goes).
    pub hz: Option<f64>,
    pub policy: Policy,
    /// Send commands (GetAgentSchema, ResetAgent, streams, debug draws).
    pub commands: bool,
    /// Keep every step's round-trip time (for `sim bench`).
    pub record_latency: bool,
    /// How long to wait for one frame before giving up.
    pub step_timeout: Duration,
}

/// What happened during a run.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ClientStats {
    pub steps: u64,
    pub env_resets: u64,
    pub requests: u64,
    pub responses: u64,
    pub error_responses: u64,
    /// Frames whose `frame_seq` was not exactly the `action_seq` just sent.
    pub frame_mismatches: u64,
    pub elapsed_secs: f64,
    #[serde(skip)]
    pub latencies_ns: Vec<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{0}")]
    Name(#[from] NameError),
    #[error("{0}")]
    Open(#[from] ::lrbc::segment::OpenError),
    #[error("{0}")]
    Layout(#[from] layout::LayoutError),
    #[error(
        "no frame within {secs:.1} s of action_seq {action_seq} (is the engine running in training mode?)"
    )]
    StepTimeout { action_seq: u64, secs: f64 },
    #[error("{0}")]
    Config(String),
}

enum CmdRings {
    Lrbc {
        out: v1::V1Producer,
        inbound: v1::V1Consumer,
    },
    Lucky {
        out: lucky::LuckyProducer,
        inbound: lucky::LuckyConsumer,
    },
}

struct Offsets {
    frame_seq: u64,
    action_seq: u64,
    client_pid: u64,
    action_time_ns: Option<u64>,
    client_ready: Option<u64>,
}

/// Uniform actions in [-1, 1): twelve 5-bit values from each 64-bit draw (coarse, but a
/// random policy needs no more, and it keeps the client's share of a step small).
fn random_actions(actions: &mut [f32], state: &mut u64) {
    for chunk in actions.chunks_mut(12) {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        let mut bits = *state;
        for a in chunk {
            *a = (bits & 31) as f32 * (2.0 / 32.0) - 1.0;
            bits >>= 5;
        }
    }
}

/// Runs the client until `stop`, `steps`, or an error.
pub fn run(cfg: &ClientConfig, stop: &AtomicBool) -> Result<ClientStats, ClientError> {
    let period = match cfg.hz {
        None => None,
        Some(hz) if hz.is_finite() && hz > 0.0 => Some(
            Duration::try_from_secs_f64(1.0 / hz)
                .map_err(|_| ClientError::Config(format!("--hz {hz} is too slow a pace")))?,
        ),
        Some(hz) => {
            return Err(ClientError::Config(format!(
                "--hz must be positive, not {hz}"
            )));
        }
    };
    let seg = SegmentRw::open_at(&shm_location(&cfg.name)?)?;
    let g: Geometry = layout::inspect(&seg, LayoutChoice::Auto)?;
    let lucky_layout = g.layout == Layout::LuckyrobotsIpc;
    // The header's words, through the wire structs the geometry was read with.
    let c = g.counters;
    let o = Offsets {
        frame_seq: c.frame_seq,
        action_seq: c.action_seq,
        client_pid: c.client_pid,
        action_time_ns: c.ext.map(|e| e.action_time_ns),
        client_ready: lucky_layout.then_some(layout::headers::LuckyHeader::CLIENT_READY_OFFSET),
    };
    let region = |k| g.region(k).map(|r| r.offset_bytes);
    let (Some(act_at), Some(resets_at), Some(dones_at)) = (
        region(RegionKind::Act),
        region(RegionKind::Resets),
        region(RegionKind::Dones),
    ) else {
        return Err(ClientError::Config("the segment lacks hot regions".into()));
    };
    let truncs_at = region(RegionKind::Truncateds);
    let obs_at = region(RegionKind::Obs);
    let mut obs = if cfg.policy == Policy::Balance {
        vec![0f32; g.num_envs as usize * g.obs_size as usize]
    } else {
        Vec::new()
    };
    let (Some(c2s), Some(s2c)) = (
        g.ring(RegionKind::CmdC2s).copied(),
        g.ring(RegionKind::CmdS2c).copied(),
    ) else {
        return Err(ClientError::Config(
            "the segment has no command rings".into(),
        ));
    };
    let mut rings = if lucky_layout {
        CmdRings::Lucky {
            out: lucky::LuckyProducer::new(&seg, c2s),
            inbound: lucky::LuckyConsumer::new(&seg, s2c),
        }
    } else {
        CmdRings::Lrbc {
            out: v1::V1Producer::new(&seg, c2s),
            inbound: v1::V1Consumer::new(&seg, s2c),
        }
    };

    seg.store_u32(o.client_pid, std::process::id());
    if let Some(w) = o.client_ready {
        seg.store_u32(w, 1);
    }
    let guard = ClientGuard {
        seg: &seg,
        client_pid: o.client_pid,
        client_ready: o.client_ready,
    };

    let n = g.num_envs as usize;
    let act_size = g.act_size as usize;
    let mut actions = vec![0f32; n * act_size];
    let mut resets = vec![0u8; n];
    let mut dones = vec![0u8; n];
    let mut truncs = vec![0u8; n];
    let mut stats = ClientStats::default();
    if cfg.record_latency {
        stats
            .latencies_ns
            .reserve(cfg.steps.unwrap_or(100_000) as usize);
    }
    let mut rng = 0x2545_F491_4F6C_DD1D_u64 ^ u64::from(std::process::id());
    let mut correlation_id = 1u64;
    let mut send = |rings: &mut CmdRings,
                    stats: &mut ClientStats,
                    method: fb::MethodId,
                    build: &dyn Fn(
        &mut flatbuffers::FlatBufferBuilder<'_>,
    ) -> rpc::BuiltPayload| {
        correlation_id += 1;
        let ok = match rings {
            CmdRings::Lrbc { out, .. } => {
                let bytes =
                    rpc::build_envelope(correlation_id, method, None, monotonic_now_ns(), build);
                out.try_push(&seg, &bytes).is_ok()
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
                out.try_push(&seg, h, body.as_bytes()).is_ok()
            }
        };
        if ok {
            stats.requests += 1;
        }
    };

    if cfg.commands {
        send(
            &mut rings,
            &mut stats,
            fb::MethodId::GetAgentSchema,
            &|fbb| {
                let name = fbb.create_string("cartpole");
                let req = fb::GetAgentSchemaReq::create(
                    fbb,
                    &fb::GetAgentSchemaReqArgs {
                        agent_name: Some(name),
                    },
                );
                Some((fb::Payload::GetAgentSchemaReq, req.as_union_value()))
            },
        );
        send(
            &mut rings,
            &mut stats,
            fb::MethodId::SetSimulationMode,
            &|fbb| {
                let req = fb::SetSimulationModeReq::create(
                    fbb,
                    &fb::SetSimulationModeReqArgs {
                        mode: fb::SimulationMode::SIMULATION_MODE_FAST,
                    },
                );
                Some((fb::Payload::SetSimulationModeReq, req.as_union_value()))
            },
        );
        send(
            &mut rings,
            &mut stats,
            fb::MethodId::TelemetryStream,
            &|fbb| {
                let req = fb::TelemetryStreamReq::create(
                    fbb,
                    &fb::TelemetryStreamReqArgs { target_fps: 10 },
                );
                Some((fb::Payload::TelemetryStreamReq, req.as_union_value()))
            },
        );
        if let Some(img) = g.image {
            let format = if img.width * img.height > 128 * 128 {
                fb::ImageFormat::Jpeg
            } else {
                fb::ImageFormat::Raw
            };
            send(&mut rings, &mut stats, fb::MethodId::CameraStream, &|fbb| {
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

    let started = Instant::now();
    let mut next_tick = Instant::now();
    let mut last_frame = seg.load_u64(o.frame_seq).unwrap_or(0);
    let mut buf = Vec::new();
    let mut waiter = Waiter::new();
    // Relaxed: a flag with no data behind it.
    while !stop.load(Ordering::Relaxed) && cfg.steps.is_none_or(|s| stats.steps < s) {
        // Actions, and reset flags for the envs that ended last frame.
        let t = stats.steps as f32 * 0.05;
        match cfg.policy {
            Policy::Random => random_actions(&mut actions, &mut rng),
            Policy::Zero => actions.fill(0.0),
            Policy::Sine => {
                for (i, a) in actions.iter_mut().enumerate() {
                    *a = (t + (i / act_size.max(1)) as f32 * 0.7).sin();
                }
            }
            Policy::Balance => {
                random_actions(&mut actions, &mut rng);
                if let Some(at) = obs_at {
                    seg.read_f32s(at, &mut obs);
                    let per = g.obs_size as usize;
                    for env in 0..n {
                        let o = &obs[env * per..(env + 1) * per];
                        let (x, v, theta, omega) = (o.first(), o.get(1), o.get(2), o.get(3));
                        let u = match (x, v, theta, omega) {
                            (Some(x), Some(v), Some(th), Some(om)) => {
                                1.2 * th + 0.35 * om + 0.02 * x + 0.06 * v
                            }
                            _ => 0.0,
                        };
                        let row = &mut actions[env * act_size..(env + 1) * act_size];
                        // 0.1 of the random draw as noise on the force; other channels stay random.
                        row[0] = (u * 1.0 + 0.1 * row[0]).clamp(-1.0, 1.0);
                    }
                }
            }
        }
        seg.read_at(dones_at, &mut dones);
        if let Some(at) = truncs_at {
            seg.read_at(at, &mut truncs);
        }
        let mut any_reset = false;
        for i in 0..n {
            resets[i] = u8::from(dones[i] != 0 || truncs[i] != 0);
            any_reset |= resets[i] != 0;
        }
        if any_reset {
            stats.env_resets += resets.iter().filter(|&&r| r != 0).count() as u64;
        }
        if cfg.commands && resets.first() == Some(&1) {
            // A new episode of env 0: a ResetAgent with a simulation contract.
            send(&mut rings, &mut stats, fb::MethodId::ResetAgent, &|fbb| {
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
        if cfg.commands && stats.steps % 250 == 100 {
            send(&mut rings, &mut stats, fb::MethodId::DebugDraw, &|fbb| {
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
        if cfg.commands && stats.steps % 500 == 250 {
            send(
                &mut rings,
                &mut stats,
                fb::MethodId::GetJointState,
                &|fbb| {
                    let name = fbb.create_string("cartpole");
                    let req = fb::GetJointStateReq::create(
                        fbb,
                        &fb::GetJointStateReqArgs {
                            robot_name: Some(name),
                        },
                    );
                    Some((fb::Payload::GetJointStateReq, req.as_union_value()))
                },
            );
        }

        seg.write_f32s(act_at, &actions);
        seg.write_at(resets_at, &resets);
        let t0 = Instant::now();
        if let Some(w) = o.action_time_ns {
            seg.store_u64(w, monotonic_now_ns());
        }
        // Release (fetch_add AcqRel): publishes the actions and reset flags written
        // above; pairs with the engine's Acquire load of action_seq.
        let action_seq = seg.fetch_add_u64(o.action_seq, 1).unwrap_or(0);
        let frame = loop {
            // Acquire: pairs with the engine's Release store of frame_seq.
            let f = seg.load_u64(o.frame_seq).unwrap_or(0);
            if f != last_frame {
                break f;
            }
            if waiter.spins() % 1024 == 1023 && t0.elapsed() > cfg.step_timeout {
                return Err(ClientError::StepTimeout {
                    action_seq,
                    secs: cfg.step_timeout.as_secs_f64(),
                });
            }
            // Relaxed: see above.
            if stop.load(Ordering::Relaxed) {
                break last_frame;
            }
            waiter.wait();
        };
        // The wait is over: its length tunes the next one.
        waiter.reset();
        let arrived = Instant::now();
        if frame == last_frame {
            break;
        }
        if cfg.record_latency {
            stats.latencies_ns.push(t0.elapsed().as_nanos() as u64);
        }
        if frame != action_seq {
            stats.frame_mismatches += 1;
        }
        last_frame = frame;
        stats.steps += 1;

        // Responses and stream frames.
        loop {
            let got = match &mut rings {
                CmdRings::Lrbc { inbound, .. } => match inbound.try_pop(&seg, &mut buf) {
                    Ok(Some(_)) => Some(
                        rpc::decode_envelope(&buf)
                            .map(|d| d.error.is_some())
                            .unwrap_or(true),
                    ),
                    _ => None,
                },
                CmdRings::Lucky { inbound, .. } => match inbound.try_pop(&seg, &mut buf) {
                    Ok(Some(h)) => Some(h.method_or_status != 0),
                    _ => None,
                },
            };
            match got {
                Some(error) => {
                    stats.responses += 1;
                    stats.error_responses += u64::from(error);
                }
                None => break,
            }
        }

        if let Some(p) = period {
            next_tick += p;
            let now = Instant::now();
            if now > next_tick && now - next_tick > p * 10 {
                // Far behind (a stall): start the schedule over rather than burst.
                next_tick = now;
            }
            // Behind after a late step (a slow frame, a descheduled thread): catch up
            // over the next steps, never sending two actions less than half a period
            // apart, so the average rate stays at the pace without a burst of frames
            // that live only microseconds. And like a trainer whose policy takes time
            // on each observation, never answering a frame less than a quarter period
            // after it came: a frame answered at once is overwritten before anyone else
            // can read it.
            sleep_until(next_tick.max(t0 + p / 2).max(arrived + p / 4), stop);
        }
    }
    stats.elapsed_secs = started.elapsed().as_secs_f64();
    drop(guard);
    Ok(stats)
}

/// Waits until `deadline`: sleeps while far from it (timers here overshoot by a few
/// hundred microseconds), then yields until it, so paced steps stay evenly spaced.
/// Wakes early when stopped.
fn sleep_until(deadline: Instant, stop: &AtomicBool) {
    const SPIN_WINDOW: Duration = Duration::from_micros(120);
    loop {
        let now = Instant::now();
        // Relaxed: a flag with no data behind it.
        if now >= deadline || stop.load(Ordering::Relaxed) {
            return;
        }
        let left = deadline - now;
        if left > SPIN_WINDOW {
            std::thread::sleep((left - SPIN_WINDOW).min(Duration::from_millis(20)));
        } else {
            std::thread::yield_now();
        }
    }
}

/// Clears `client_pid` (and `client_ready`) however the client ends.
struct ClientGuard<'a> {
    seg: &'a SegmentRw,
    client_pid: u64,
    client_ready: Option<u64>,
}

impl Drop for ClientGuard<'_> {
    fn drop(&mut self) {
        if let Some(w) = self.client_ready {
            self.seg.store_u32(w, 0);
        }
        self.seg.store_u32(self.client_pid, 0);
    }
}
