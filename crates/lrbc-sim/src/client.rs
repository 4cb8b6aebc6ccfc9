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
    let period = step_period(cfg.hz)?;
    let seg = SegmentRw::open_at(&shm_location(&cfg.name)?)?;
    let g: Geometry = layout::inspect(&seg, LayoutChoice::Auto)?;
    let mut client = Client::new(&seg, &g, cfg)?;
    let guard = client.announce();
    if cfg.commands {
        client.send_opening_requests(g.image);
    }

    let started = Instant::now();
    let mut next_tick = Instant::now();
    let mut last_frame = seg.load_u64(client.offsets.frame_seq).unwrap_or(0);
    let mut waiter = Waiter::new();
    // Relaxed: a flag with no data behind it.
    while !stop.load(Ordering::Relaxed) && cfg.steps.is_none_or(|s| client.stats.steps < s) {
        client.choose_actions();
        client.flag_resets();
        if cfg.commands {
            client.send_step_requests();
        }
        let (action_seq, t0) = client.publish_step();
        let Some(frame) = client.wait_for_frame(last_frame, action_seq, t0, &mut waiter, stop)?
        else {
            break;
        };
        let arrived = Instant::now();
        client.count_step(frame, action_seq, t0);
        last_frame = frame;
        client.drain_responses();
        if let Some(p) = period {
            next_tick = wait_for_next_tick(next_tick, p, t0, arrived, stop);
        }
    }
    let mut stats = std::mem::take(&mut client.stats);
    stats.elapsed_secs = started.elapsed().as_secs_f64();
    drop(guard);
    Ok(stats)
}

/// The time between two steps at `hz` steps per second (`None`: as fast as the engine
/// goes).
fn step_period(hz: Option<f64>) -> Result<Option<Duration>, ClientError> {
    match hz {
        None => Ok(None),
        Some(hz) if hz.is_finite() && hz > 0.0 => Ok(Some(
            Duration::try_from_secs_f64(1.0 / hz)
                .map_err(|_| ClientError::Config(format!("--hz {hz} is too slow a pace")))?,
        )),
        Some(hz) => Err(ClientError::Config(format!(
            "--hz must be positive, not {hz}"
        ))),
    }
}

/// Waits for the next step's tick after `next_tick` and returns it.
fn wait_for_next_tick(
    mut next_tick: Instant,
    p: Duration,
    t0: Instant,
    arrived: Instant,
    stop: &AtomicBool,
) -> Instant {
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
    next_tick
}

/// The client's side of one attached segment: where its words and regions are, the
/// command rings, the buffers of each step and what it counted.
struct Client<'s> {
    seg: &'s SegmentRw,
    cfg: &'s ClientConfig,
    offsets: Offsets,
    num_envs: usize,
    act_size: usize,
    obs_size: usize,
    act_at: u64,
    resets_at: u64,
    dones_at: u64,
    truncs_at: Option<u64>,
    obs_at: Option<u64>,
    rings: CmdRings,
    actions: Vec<f32>,
    resets: Vec<u8>,
    dones: Vec<u8>,
    truncs: Vec<u8>,
    obs: Vec<f32>,
    buf: Vec<u8>,
    stats: ClientStats,
    rng: u64,
    correlation_id: u64,
}

impl<'s> Client<'s> {
    /// Finds the header's words, the hot regions and the command rings of `g`.
    fn new(seg: &'s SegmentRw, g: &Geometry, cfg: &'s ClientConfig) -> Result<Self, ClientError> {
        let lucky_layout = g.layout == Layout::LuckyrobotsIpc;
        // The header's words, through the wire structs the geometry was read with.
        let c = g.counters;
        let offsets = Offsets {
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
        let obs = if cfg.policy == Policy::Balance {
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
        let rings = if lucky_layout {
            CmdRings::Lucky {
                out: lucky::LuckyProducer::new(seg, c2s),
                inbound: lucky::LuckyConsumer::new(seg, s2c),
            }
        } else {
            CmdRings::Lrbc {
                out: v1::V1Producer::new(seg, c2s),
                inbound: v1::V1Consumer::new(seg, s2c),
            }
        };
        let n = g.num_envs as usize;
        let act_size = g.act_size as usize;
        let mut stats = ClientStats::default();
        if cfg.record_latency {
            stats
                .latencies_ns
                .reserve(cfg.steps.unwrap_or(100_000) as usize);
        }
        Ok(Self {
            seg,
            cfg,
            offsets,
            num_envs: n,
            act_size,
            obs_size: g.obs_size as usize,
            act_at,
            resets_at,
            dones_at,
            truncs_at,
            obs_at,
            rings,
            actions: vec![0f32; n * act_size],
            resets: vec![0u8; n],
            dones: vec![0u8; n],
            truncs: vec![0u8; n],
            obs,
            buf: Vec::new(),
            stats,
            rng: 0x2545_F491_4F6C_DD1D_u64 ^ u64::from(std::process::id()),
            correlation_id: 1,
        })
    }

    /// Writes `client_pid` (and `client_ready`); the guard clears them however the
    /// client ends.
    fn announce(&self) -> ClientGuard<'s> {
        let o = &self.offsets;
        self.seg.store_u32(o.client_pid, std::process::id());
        if let Some(w) = o.client_ready {
            self.seg.store_u32(w, 1);
        }
        ClientGuard {
            seg: self.seg,
            client_pid: o.client_pid,
            client_ready: o.client_ready,
        }
    }

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
    fn send_opening_requests(&mut self, image: Option<layout::ImageGeometry>) {
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

    /// This step's actions, by the policy.
    fn choose_actions(&mut self) {
        let t = self.stats.steps as f32 * 0.05;
        let act_size = self.act_size;
        match self.cfg.policy {
            Policy::Random => random_actions(&mut self.actions, &mut self.rng),
            Policy::Zero => self.actions.fill(0.0),
            Policy::Sine => {
                for (i, a) in self.actions.iter_mut().enumerate() {
                    *a = (t + (i / act_size.max(1)) as f32 * 0.7).sin();
                }
            }
            Policy::Balance => {
                random_actions(&mut self.actions, &mut self.rng);
                if let Some(at) = self.obs_at {
                    self.seg.read_f32s(at, &mut self.obs);
                    let per = self.obs_size;
                    for env in 0..self.num_envs {
                        let o = &self.obs[env * per..(env + 1) * per];
                        let (x, v, theta, omega) = (o.first(), o.get(1), o.get(2), o.get(3));
                        let u = match (x, v, theta, omega) {
                            (Some(x), Some(v), Some(th), Some(om)) => {
                                1.2 * th + 0.35 * om + 0.02 * x + 0.06 * v
                            }
                            _ => 0.0,
                        };
                        let row = &mut self.actions[env * act_size..(env + 1) * act_size];
                        // 0.1 of the random draw as noise on the force; other channels stay random.
                        row[0] = (u * 1.0 + 0.1 * row[0]).clamp(-1.0, 1.0);
                    }
                }
            }
        }
    }

    /// Reset flags for the envs that ended last frame (done or truncated).
    fn flag_resets(&mut self) {
        self.seg.read_at(self.dones_at, &mut self.dones);
        if let Some(at) = self.truncs_at {
            self.seg.read_at(at, &mut self.truncs);
        }
        let mut any_reset = false;
        for i in 0..self.num_envs {
            self.resets[i] = u8::from(self.dones[i] != 0 || self.truncs[i] != 0);
            any_reset |= self.resets[i] != 0;
        }
        if any_reset {
            self.stats.env_resets += self.resets.iter().filter(|&&r| r != 0).count() as u64;
        }
    }

    /// The requests of this step: a ResetAgent when env 0 starts an episode, a debug
    /// draw and a joint-state query now and then.
    fn send_step_requests(&mut self) {
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

    /// Writes the actions and reset flags and bumps `action_seq`; returns the
    /// `action_seq` before the bump and when it was published.
    fn publish_step(&mut self) -> (u64, Instant) {
        self.seg.write_f32s(self.act_at, &self.actions);
        self.seg.write_at(self.resets_at, &self.resets);
        let t0 = Instant::now();
        if let Some(w) = self.offsets.action_time_ns {
            self.seg.store_u64(w, monotonic_now_ns());
        }
        // Release (fetch_add AcqRel): publishes the actions and reset flags written
        // above; pairs with the engine's Acquire load of action_seq.
        let action_seq = self
            .seg
            .fetch_add_u64(self.offsets.action_seq, 1)
            .unwrap_or(0);
        (action_seq, t0)
    }

    /// Waits until `frame_seq` moves past `last_frame` and returns it; `None` if
    /// stopped first.
    fn wait_for_frame(
        &self,
        last_frame: u64,
        action_seq: u64,
        t0: Instant,
        waiter: &mut Waiter,
        stop: &AtomicBool,
    ) -> Result<Option<u64>, ClientError> {
        let frame = loop {
            // Acquire: pairs with the engine's Release store of frame_seq.
            let f = self.seg.load_u64(self.offsets.frame_seq).unwrap_or(0);
            if f != last_frame {
                break Some(f);
            }
            if waiter.spins() % 1024 == 1023 && t0.elapsed() > self.cfg.step_timeout {
                return Err(ClientError::StepTimeout {
                    action_seq,
                    secs: self.cfg.step_timeout.as_secs_f64(),
                });
            }
            // Relaxed: a flag with no data behind it.
            if stop.load(Ordering::Relaxed) {
                break None;
            }
            waiter.wait();
        };
        // The wait is over: its length tunes the next one.
        waiter.reset();
        Ok(frame)
    }

    /// Counts a step whose frame came: its round trip and whether the frame answered
    /// the action just sent.
    fn count_step(&mut self, frame: u64, action_seq: u64, t0: Instant) {
        if self.cfg.record_latency {
            self.stats.latencies_ns.push(t0.elapsed().as_nanos() as u64);
        }
        if frame != action_seq {
            self.stats.frame_mismatches += 1;
        }
        self.stats.steps += 1;
    }

    /// Consumes the responses and stream frames waiting on the command ring.
    fn drain_responses(&mut self) {
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
