//! A frame's summary: what the window's all-env overview plots of it (the rewards' min,
//! p10, median, mean, p90 and max; how many envs are done, truncated and reset; NaN
//! and infinite rewards) and the reward and flags of the first served envs, as a JSON
//! message of a few hundred bytes (`serve`'s [`SUMMARY_TOPIC`]). A viewer on a link too
//! thin for whole frames still sees every frame's shape; Foxglove plots its fields as
//! those of any JSON channel. The server writes it ([`FrameSummary::of`]) and the
//! viewer's feed reads it ([`FrameSummary::decode`]), with the reduction the player
//! makes of a whole frame (`lrbc_recording::replay::player::publish`).

use serde::{Deserialize, Serialize};

use lrbc_live::sampler::{EnvPoint, FLAG_DONE, FLAG_RESET, FLAG_TRUNCATED, FrameAgg};
use lrbc_recording::format::RecFrame;
use lrbc_recording::replay::player::publish::{self, Reduced};

/// The topic of the frames' summaries.
pub const SUMMARY_TOPIC: &str = "/lrbc/summary";
/// The served envs a summary has rows for at most (the first ones): a summary stays a
/// few hundred bytes whatever `--envs` serves.
pub const SUMMARY_ROWS: usize = 8;

/// The rewards of every env of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rewards {
    pub min: Option<f32>,
    pub p10: Option<f32>,
    pub median: Option<f32>,
    pub mean: Option<f32>,
    pub p90: Option<f32>,
    pub max: Option<f32>,
}

/// The served envs at one frame, a column each (`done`, `truncated`, `reset`: 0 or 1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvRows {
    pub env: Vec<u32>,
    pub reward: Vec<Option<f32>>,
    pub done: Vec<u8>,
    pub truncated: Vec<u8>,
    pub reset: Vec<u8>,
}

/// One frame's summary, as it goes on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameSummary {
    pub frame_seq: u64,
    /// The recorder's clock when it sampled the frame (the machine's monotonic clock).
    pub sampled_ns: u64,
    pub envs: u32,
    pub reward: Rewards,
    pub dones: u32,
    pub truncateds: u32,
    pub resets: u32,
    /// Shares of the envs done and truncated, 0 to 1.
    pub done_share: f32,
    pub truncated_share: f32,
    pub nan_rewards: u32,
    pub inf_rewards: u32,
    /// The first [`SUMMARY_ROWS`] served envs.
    pub rows: EnvRows,
}

/// A number as JSON has it: not a finite number is left out (null).
fn finite(x: f32) -> Option<f32> {
    x.is_finite().then_some(x)
}

impl FrameSummary {
    /// The summary of a frame.
    pub fn of(f: &RecFrame) -> Self {
        let a = publish::aggregate(f);
        let n = f.rewards.len().max(1) as f32;
        Self {
            frame_seq: a.frame_seq,
            sampled_ns: f.sampled_ns,
            envs: f.rewards.len() as u32,
            reward: Rewards {
                min: finite(a.reward_min),
                p10: finite(a.reward_p10),
                median: finite(a.reward_p50),
                mean: finite(a.reward_mean),
                p90: finite(a.reward_p90),
                max: finite(a.reward_max),
            },
            dones: a.dones,
            truncateds: a.truncateds,
            resets: a.resets,
            done_share: a.dones as f32 / n,
            truncated_share: a.truncateds as f32 / n,
            nan_rewards: a.nan_rewards,
            inf_rewards: f.rewards.iter().filter(|r| r.is_infinite()).count() as u32,
            rows: {
                let mut rows = EnvRows::default();
                let envs = &f.envs[..f.envs.len().min(SUMMARY_ROWS)];
                for (env, p) in publish::points(f, envs) {
                    let bit = |b: u8| u8::from(p.flags & b != 0);
                    rows.env.push(env);
                    rows.reward.push(finite(p.reward));
                    rows.done.push(bit(FLAG_DONE));
                    rows.truncated.push(bit(FLAG_TRUNCATED));
                    rows.reset.push(bit(FLAG_RESET));
                }
                rows
            },
        }
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A summary's bytes, or None if they are not one.
    pub fn decode(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }

    /// What the summary adds to the histories, logged at `log_ns` (the window's clock).
    pub(crate) fn reduced(&self, log_ns: u64) -> Reduced {
        let r = &self.reward;
        let nan = f32::NAN;
        let agg = FrameAgg {
            frame_seq: self.frame_seq,
            t_ns: log_ns,
            reward_min: r.min.unwrap_or(nan),
            reward_p10: r.p10.unwrap_or(nan),
            reward_p50: r.median.unwrap_or(nan),
            reward_mean: r.mean.unwrap_or(nan),
            reward_p90: r.p90.unwrap_or(nan),
            reward_max: r.max.unwrap_or(nan),
            dones: self.dones,
            truncateds: self.truncateds,
            resets: self.resets,
            nan_rewards: self.nan_rewards,
            step_latency_ns: None,
        };
        let rows = &self.rows;
        let bit = |v: &[u8], i: usize, b: u8| {
            if v.get(i).is_some_and(|&x| x != 0) {
                b
            } else {
                0
            }
        };
        let points = (rows.env.iter().enumerate())
            .map(|(i, &env)| {
                let p = EnvPoint {
                    frame_seq: self.frame_seq,
                    t_ns: log_ns,
                    reward: rows.reward.get(i).copied().flatten().unwrap_or(nan),
                    flags: bit(&rows.done, i, FLAG_DONE)
                        | bit(&rows.truncated, i, FLAG_TRUNCATED)
                        | bit(&rows.reset, i, FLAG_RESET),
                };
                (env, p)
            })
            .collect();
        Reduced {
            agg,
            points,
            rows: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> RecFrame {
        let mut rewards: Vec<f32> = (0..4096).map(|i| i as f32 / 4096.0).collect();
        rewards[7] = f32::NAN;
        let mut dones = vec![0u8; 4096];
        dones[2] = 1;
        RecFrame {
            log_ns: 5,
            frame_seq: 42,
            frame_time_ns: 0,
            action_seq: 42,
            action_time_ns: 0,
            sampled_ns: 99,
            rewards,
            dones,
            truncateds: Some(vec![0; 4096]),
            resets: vec![0; 4096],
            envs: vec![0, 2, 3],
            observations: vec![0.0; 3 * 4],
            actions: vec![0.0; 3 * 2],
            obs_size: 4,
            act_size: 2,
        }
    }

    #[test]
    fn a_summary_of_4096_envs_is_a_few_hundred_bytes_and_reads_back_as_the_frame_reduces() {
        let f = frame();
        let s = FrameSummary::of(&f);
        let bytes = s.encode();
        assert!(bytes.len() < 400, "{} bytes", bytes.len());
        let back = FrameSummary::decode(&bytes).unwrap();
        assert_eq!(back, s);
        assert_eq!((s.nan_rewards, s.inf_rewards, s.dones), (1, 0, 1));
        assert_eq!(s.rows.env, [0, 2, 3]);
        assert_eq!(s.rows.done, [0, 1, 0]);
        // The same figures as the whole frame gives the histories.
        let whole = Reduced {
            agg: publish::aggregate(&f),
            points: publish::points(&f, &f.envs),
            rows: Vec::new(),
        };
        let from_summary = back.reduced(whole.agg.t_ns);
        assert_eq!(from_summary.agg, whole.agg);
        assert_eq!(from_summary.points.len(), whole.points.len());
        for (a, b) in from_summary.points.iter().zip(&whole.points) {
            assert_eq!(a.0, b.0);
            assert_eq!(a.1.flags, b.1.flags);
            assert_eq!(a.1.reward.to_bits(), b.1.reward.to_bits());
        }
        assert!(FrameSummary::decode(b"{not json").is_none());
        // Infinite rewards are counted; the figures they would make infinite are null.
        let mut f = f;
        f.rewards[8] = f32::INFINITY;
        let s = FrameSummary::of(&f);
        assert_eq!((s.inf_rewards, s.reward.max), (1, None));
    }
}
