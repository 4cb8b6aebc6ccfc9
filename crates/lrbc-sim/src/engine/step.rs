//! The step loop: lock-step with the client (training) or paced (inference), each step
//! reading actions and reset flags and publishing a frame under the spec's counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::{Engine, EngineStats, Mode, OBS_CHUNK_FLOATS};
use crate::render::render_env;
use crate::wait::Waiter;
use lrbc::clock::monotonic_now_ns;
use lrbc::layout::plan::PlanLayout;
use lrbc::layout::{LrbcHeader, LuckyHeader};

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
                        self.last_action_seq = a;
                        self.step_once(Some(a));
                        self.serve();
                        waiter.reset();
                    } else {
                        if waiter.spins().is_multiple_of(64) {
                            self.serve();
                        }
                        waiter.wait();
                    }
                }
                Mode::Inference => {
                    self.step_once(None);
                    self.serve();
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

    /// Reads actions and reset flags, steps, writes the frame.
    pub fn step_once(&mut self, action_seq: Option<u64>) {
        let act_offset = self.plan.act_offset;
        let resets_offset = self.plan.resets_offset;
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
        let now = monotonic_now_ns();
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
            if self.cfg.nan_at_step == Some(self.step) {
                // The injected fault: in the segment only, the dynamics stay finite.
                self.seg.write_f32s(self.plan.obs_offset, &[f32::NAN]);
                self.seg.write_f32s(self.plan.rewards_offset, &[f32::NAN]);
            }
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
            let word = match self.cfg.layout {
                PlanLayout::Lucky => LuckyHeader::FRAME_SEQ_OFFSET,
                PlanLayout::Lrbc { .. } => LrbcHeader::FRAME_SEQ_OFFSET,
            };
            // Release: publishes the frame written above; pairs with the client's
            // Acquire load of frame_seq.
            self.seg.store_u64(word, self.frame_seq);
        }
    }
}
