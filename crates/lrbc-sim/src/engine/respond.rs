//! The engine's rings: requests on the command and control rings answered by the
//! services, streamed frames, and the luckyrobots layout's JSON commands.

use serde_json::{Value, json};

use super::{Engine, EngineConfig};
use crate::services::World;
use ::lrbc::layout::plan::{Plan, PlanLayout, PlanSpec};
use ::lrbc::layout::{LrbcHeader, RegionKind, RingFormat, RingGeometry};
use ::lrbc::rings::{LuckyEntryHeader, lucky, v1};
use ::lrbc::segment::SegmentRw;

/// The engine's ends of the segment's rings.
pub(super) enum Rings {
    Lrbc {
        cmd_in: v1::V1Consumer,
        cmd_out: v1::V1Producer,
        ctl: Option<(v1::V1Consumer, v1::V1Producer)>,
    },
    Lucky {
        cmd_in: lucky::LuckyConsumer,
        cmd_out: lucky::LuckyProducer,
    },
}

impl Rings {
    /// A consumer of each ring that requests arrive on and a producer of each ring
    /// that responses go to, as the plan places them.
    pub(super) fn new(seg: &SegmentRw, cfg: &EngineConfig, spec: &PlanSpec, plan: &Plan) -> Self {
        let ring = |kind, offset_bytes, capacity_bytes, format| RingGeometry {
            kind,
            format,
            offset_bytes,
            capacity_bytes,
        };
        match cfg.layout {
            PlanLayout::Lucky => Rings::Lucky {
                cmd_in: lucky::LuckyConsumer::new(
                    seg,
                    ring(
                        RegionKind::CmdC2s,
                        plan.cmd_c2s_offset,
                        cfg.ring_size,
                        RingFormat::Lucky,
                    ),
                ),
                cmd_out: lucky::LuckyProducer::new(
                    seg,
                    ring(
                        RegionKind::CmdS2c,
                        plan.cmd_s2c_offset,
                        cfg.ring_size,
                        RingFormat::Lucky,
                    ),
                ),
            },
            PlanLayout::Lrbc { .. } => Rings::Lrbc {
                cmd_in: v1::V1Consumer::new(
                    seg,
                    ring(
                        RegionKind::CmdC2s,
                        plan.cmd_c2s_offset,
                        cfg.ring_size,
                        RingFormat::Lrbc,
                    ),
                ),
                cmd_out: v1::V1Producer::new(
                    seg,
                    ring(
                        RegionKind::CmdS2c,
                        plan.cmd_s2c_offset,
                        cfg.ring_size,
                        RingFormat::Lrbc,
                    ),
                ),
                ctl: spec.ctl_ring_size.map(|cap| {
                    (
                        v1::V1Consumer::new(
                            seg,
                            ring(
                                RegionKind::CtlC2s,
                                plan.ctl_c2s_offset,
                                cap,
                                RingFormat::Lrbc,
                            ),
                        ),
                        v1::V1Producer::new(
                            seg,
                            ring(
                                RegionKind::CtlS2c,
                                plan.ctl_s2c_offset,
                                cap,
                                RingFormat::Lrbc,
                            ),
                        ),
                    )
                }),
            },
        }
    }
}

impl Engine {
    /// Answers what is waiting on the command and control rings, and sends due frames.
    pub(super) fn answer_rings(&mut self) {
        let world = World {
            sim: &self.sim,
            obs_names: &self.obs_names,
            act_names: &self.act_names,
            actions: &self.actions,
            image: self.cfg.image,
            images: &self.images,
            step: self.step,
            now_ns: self.clock.now_ns(),
        };
        match &mut self.rings {
            Rings::Lrbc {
                cmd_in,
                cmd_out,
                ctl,
            } => {
                let mut served = 0;
                while let Ok(Some(_)) = cmd_in.try_pop(&self.seg, &mut self.scratch) {
                    served += 1;
                    if let Some(resp) = self.services.handle(&self.scratch, &world)
                        && cmd_out.try_push(&self.seg, &resp).is_err()
                    {
                        self.stats.responses_dropped += 1;
                    }
                }
                if let Some((ctl_in, ctl_out)) = ctl {
                    while let Ok(Some(_)) = ctl_in.try_pop(&self.seg, &mut self.scratch) {
                        served += 1;
                        if let Some(resp) = self.services.handle(&self.scratch, &world)
                            && ctl_out.try_push(&self.seg, &resp).is_err()
                        {
                            self.stats.responses_dropped += 1;
                        }
                    }
                }
                self.frames.clear();
                self.services.stream_frames(&world, &mut self.frames);
                for f in &self.frames {
                    if cmd_out.try_push(&self.seg, f).is_err() {
                        self.stats.responses_dropped += 1;
                    }
                }
                self.stats.requests += served;
                if served > 0 {
                    self.seg
                        .store_u32(LrbcHeader::SERVICE_FLAGS_OFFSET, self.services.flags());
                }
            }
            Rings::Lucky { cmd_in, cmd_out } => {
                while let Ok(Some(h)) = cmd_in.try_pop(&self.seg, &mut self.scratch) {
                    self.stats.requests += 1;
                    let (status, body) = lucky_response(h.method_or_status, &self.scratch);
                    let header = LuckyEntryHeader {
                        correlation_id: h.correlation_id,
                        method_or_status: status,
                        payload_length: 0,
                    };
                    if cmd_out
                        .try_push(&self.seg, header, body.to_string().as_bytes())
                        .is_err()
                    {
                        self.stats.responses_dropped += 1;
                    }
                }
            }
        }
    }
}

/// The luckyrobots JSON commands (spec 8): status 0 and an object on success,
/// non-zero and `{"error": …}` on failure.
pub fn lucky_response(method: u32, payload: &[u8]) -> (u32, Value) {
    let request: Value = match serde_json::from_slice(payload) {
        Ok(v) => v,
        Err(e) => return (3, json!({"error": format!("the request is not JSON: {e}")})),
    };
    match method {
        1 => (
            0,
            json!({
                "success": true,
                "message": format!(
                    "agent {:?} reset{}",
                    request.get("agent_name").and_then(Value::as_str).unwrap_or(""),
                    if request.get("simulation_contract").is_some() { " with its simulation contract" } else { "" }
                ),
            }),
        ),
        2 => match request.get("mode").and_then(Value::as_str) {
            Some(m @ ("realtime" | "deterministic" | "fast")) => {
                (0, json!({"success": true, "mode": m}))
            }
            Some(other) => (
                1,
                json!({"error": format!("unknown simulation mode {other:?}; use realtime, deterministic or fast")}),
            ),
            None => (1, json!({"error": "missing \"mode\""})),
        },
        other => (2, json!({"error": format!("unknown method {other}")})),
    }
}
