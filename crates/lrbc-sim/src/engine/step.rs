//! The step loop: lock-step with the client (training) or paced (inference), each step
//! reading actions and reset flags and publishing a frame under the spec's counters,
//! with the faults planted at that step.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{
    Engine, EngineStats, Mode, OBS_CHUNK_FLOATS, PlantChannel, PlantedAction, PlantedFault,
    done_count,
};
use crate::render::render_env;
use crate::wait::Waiter;
use lrbc::layout::plan::PlanLayout;
use lrbc::layout::{LrbcHeader, LuckyHeader};

/// A planted stall sleeps in slices this long, looking at the stop flag between them.
const STALL_SLICE: Duration = Duration::from_millis(10);

impl Engine {
    /// Runs until `stop` is set.
    pub fn run(&mut self, stop: &AtomicBool) -> EngineStats {
        let action_seq_word = match self.cfg.layout {
            PlanLayout::Lucky => LuckyHeader::ACTION_SEQ_OFFSET,
            PlanLayout::Lrbc { .. } => LrbcHeader::ACTION_SEQ_OFFSET,
        };
        let mut waiter = Waiter::new();
        // The pace was checked when the engine was created.
        let period = Duration::try_from_secs_f64(1.0 / self.cfg.hz).unwrap_or(Duration::MAX);
        let mut next_tick = Instant::now();
        // Relaxed: a flag with no data behind it.
        while !stop.load(Ordering::Relaxed) {
            match self.cfg.mode {
                Mode::Training => {
                    // Acquire: pairs with the client's Release store of action_seq, so
                    // its actions and reset flags are visible.
                    let a = self.seg.load_u64(action_seq_word).unwrap_or(0);
                    if a != self.last_action_seq {
                        if !self.wait_out_stalls(stop) {
                            break;
                        }
                        self.last_action_seq = a;
                        self.step_once(Some(a));
                        self.answer_rings();
                        waiter.reset();
                    } else {
                        if waiter.spins().is_multiple_of(64) {
                            self.answer_rings();
                        }
                        waiter.wait();
                    }
                }
                Mode::Inference => {
                    if !self.wait_out_stalls(stop) {
                        break;
                    }
                    self.step_once(None);
                    self.answer_rings();
                    next_tick += period;
                    let now = Instant::now();
                    if next_tick > now {
                        std::thread::sleep(next_tick - now);
                    } else {
                        next_tick = now;
                    }
                }
            }
        }
        self.stats
    }

    /// Waits as long as the stalls planted at the next step say, answering nothing:
    /// false when `stop` was set meanwhile (within one slice of [`STALL_SLICE`]).
    pub(super) fn wait_out_stalls(&self, stop: &AtomicBool) -> bool {
        let next_step = self.step + 1;
        for plant in &self.plants {
            let PlantedFault::Stall { duration } = plant.fault else {
                continue;
            };
            if !plant.shows_at(next_step) {
                continue;
            }
            let until = Instant::now() + duration;
            loop {
                // Relaxed: a flag with no data behind it.
                if stop.load(Ordering::Relaxed) {
                    return false;
                }
                let now = Instant::now();
                if now >= until {
                    break;
                }
                std::thread::sleep((until - now).min(STALL_SLICE));
            }
        }
        true
    }

    /// Reads actions and reset flags, steps, writes the frame.
    pub fn step_once(&mut self, action_seq: Option<u64>) {
        let act_offset = self.plan.act_offset;
        let resets_offset = self.plan.resets_offset;
        self.restore_actions();
        self.seg.read_f32s(act_offset, &mut self.actions);
        self.seg.read_at(resets_offset, &mut self.resets);
        let had_resets = self.resets.iter().any(|&r| r != 0);
        if self.cfg.dynamics {
            self.sim.step(&self.actions, &mut self.resets);
        } else {
            self.resets.fill(0);
        }
        if had_resets {
            // Cleared flags go back before the frame is published.
            self.seg.write_at(resets_offset, &self.resets);
        }
        self.step += 1;
        self.stats.steps += 1;
        if let Some(a) = action_seq {
            self.frame_seq = a;
        } else {
            self.frame_seq += 1;
        }
        self.write_frame(true);
    }

    /// Writes obs/rewards/dones/truncateds (and images when due) under the seqlock,
    /// then the frame counters.
    pub(super) fn write_frame(&mut self, publish: bool) {
        let ext = self.is_ext();
        let now = self.clock.now_ns();
        let image_due = self.cfg.image.is_some()
            && self.services.camera_enabled()
            && now >= self.next_image_ns
            && self.cfg.dynamics;
        if ext {
            self.seg.seqlock_begin(LrbcHeader::WRITE_SEQ_OFFSET);
        }
        if self.cfg.dynamics {
            // Chunks that stay in cache, written straight to the segment.
            let per_env = self.cfg.obs_size as usize;
            let envs_per_chunk = (OBS_CHUNK_FLOATS / per_env.max(1)).max(1);
            let len = (envs_per_chunk * per_env).min(self.obs.len());
            let chunk = &mut self.obs[..len];
            for first in (0..self.cfg.num_envs as usize).step_by(envs_per_chunk) {
                let rows = envs_per_chunk.min(self.cfg.num_envs as usize - first);
                let part = &mut chunk[..rows * per_env];
                self.sim.observe_envs(first, part);
                self.seg
                    .write_f32s(self.plan.obs_offset + (first * per_env * 4) as u64, part);
            }
            self.seg
                .write_f32s(self.plan.rewards_offset, &self.sim.reward);
            self.seg.write_at(self.plan.dones_offset, &self.sim.done);
            if ext {
                self.seg
                    .write_at(self.plan.truncateds_offset, &self.sim.truncated);
            }
            // The planted faults (`nan_at_step`'s among them): in the segment only, the
            // dynamics stay finite.
            self.plant_frame_values();
        }
        if image_due && let Some((w, h, c)) = self.cfg.image {
            let per = (w * h * c) as usize;
            for (env, img) in self.images.chunks_exact_mut(per).enumerate() {
                render_env(&self.sim, env, img, w as usize, h as usize, c as usize);
            }
            self.seg.write_at(self.plan.image_offset, &self.images);
            self.next_image_ns = now + (1e9 / self.cfg.camera_hz.max(0.1)) as u64;
            self.stats.images += 1;
        }
        if ext {
            // Even again: pairs with readers' re-load of write_seq (spec 3.2).
            self.seg.fetch_add_u64(LrbcHeader::WRITE_SEQ_OFFSET, 1);
            if image_due {
                // Release (fetch_add AcqRel): the images above are complete.
                self.seg.fetch_add_u64(LrbcHeader::IMAGE_SEQ_OFFSET, 1);
            }
            self.seg.store_u64(LrbcHeader::FRAME_TIME_NS_OFFSET, now);
        }
        if publish {
            self.plant_actions();
            let word = match self.cfg.layout {
                PlanLayout::Lucky => LuckyHeader::FRAME_SEQ_OFFSET,
                PlanLayout::Lrbc { .. } => LrbcHeader::FRAME_SEQ_OFFSET,
            };
            // Release: publishes the frame written above; pairs with the client's
            // Acquire load of frame_seq.
            self.seg.store_u64(word, self.frame_seq);
        }
    }

    /// Writes the observation, reward and done faults planted at this step over the
    /// frame's own values (inside the seqlock: the caller made `write_seq` odd).
    fn plant_frame_values(&self) {
        let per_env = u64::from(self.cfg.obs_size);
        for plant in self.plants.iter().filter(|p| p.shows_at(self.step)) {
            match plant.fault {
                PlantedFault::Value {
                    value,
                    env,
                    channel: PlantChannel::Obs { index },
                    ..
                } => {
                    let at = (u64::from(env) * per_env + u64::from(index)) * 4;
                    self.seg
                        .write_f32s(self.plan.obs_offset + at, &[value.value()]);
                }
                PlantedFault::Value {
                    value,
                    env,
                    channel: PlantChannel::Reward,
                    ..
                } => {
                    let at = u64::from(env) * 4;
                    self.seg
                        .write_f32s(self.plan.rewards_offset + at, &[value.value()]);
                }
                PlantedFault::DoneBurst { share, .. } => {
                    let count = done_count(share, self.cfg.num_envs);
                    self.seg.write_at(self.plan.dones_offset, &vec![1u8; count]);
                }
                PlantedFault::Drift { env, index, delta } => {
                    let at =
                        self.plan.obs_offset + (u64::from(env) * per_env + u64::from(index)) * 4;
                    let mut value = [0f32];
                    if self.seg.read_f32s(at, &mut value) {
                        self.seg.write_f32s(at, &[value[0] + delta]);
                    }
                }
                PlantedFault::Value {
                    channel: PlantChannel::Act { .. },
                    ..
                }
                | PlantedFault::Stall { .. } => {}
            }
        }
    }

    /// Writes the action faults planted at this step into the action region, as if the
    /// trainer had written them, before the frame is published; remembers the trainer's
    /// values they replace. The dynamics have stepped with the trainer's values.
    fn plant_actions(&mut self) {
        let per_env = self.cfg.act_size as usize;
        for plant in self.plants.iter().filter(|p| p.shows_at(self.step)) {
            let PlantedFault::Value {
                value,
                env,
                channel: PlantChannel::Act { index },
                ..
            } = plant.fault
            else {
                continue;
            };
            let slot = env as usize * per_env + index as usize;
            // The sizes were checked: the slot is inside the actions read this step.
            let Some(&trainer_value) = self.actions.get(slot) else {
                continue;
            };
            self.seg
                .write_f32s(self.plan.act_offset + slot as u64 * 4, &[value.value()]);
            self.planted_actions.push(PlantedAction {
                slot,
                trainer_value,
                planted_bits: value.value().to_bits(),
            });
        }
    }

    /// Gives the trainer's value back to each action slot the last frame planted a
    /// value in and no one has written since (a trainer writes every action before it
    /// bumps action_seq; in inference mode none may have), so that the dynamics step
    /// with the trainer's values and the fault lasts its frames only.
    fn restore_actions(&mut self) {
        for planted in self.planted_actions.drain(..) {
            let at = self.plan.act_offset + planted.slot as u64 * 4;
            let mut now = [0f32];
            if self.seg.read_f32s(at, &mut now) && now[0].to_bits() == planted.planted_bits {
                self.seg.write_f32s(at, &[planted.trainer_value]);
            }
        }
    }
}
