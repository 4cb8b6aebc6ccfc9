//! Per-frame figures over every env.

use super::data::FrameAgg;
use lrbc::snapshot::HotData;

/// Reward percentiles are taken over at most this many envs per frame.
const PERCENTILE_SAMPLE: usize = 512;

/// Minimum, maximum, sum and count of the finite values.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct RewardStats {
    pub min: f32,
    pub max: f32,
    pub sum: f64,
    pub finite: usize,
}

/// [`RewardStats`] over `values`, eight lanes at a time and without branches, so that
/// the compiler vectorises it (this runs on every frame of 4096 envs). A value that is
/// not finite is replaced by the neutral value of each figure (+inf for the minimum,
/// -inf for the maximum, 0 for the sum), and the minimum and maximum are plain
/// comparisons: `f32::min` and `max` treat NaN apart, which kept the loop scalar.
// Not inlined: compiled on its own it vectorises, inlined into the frame loop it did not.
#[inline(never)]
pub(super) fn reward_stats(values: &[f32]) -> RewardStats {
    const LANES: usize = 8;
    let mut min = [f32::INFINITY; LANES];
    let mut max = [f32::NEG_INFINITY; LANES];
    let mut finite = [0u32; LANES];
    let mut sums = [0f64; LANES];
    let chunks = values.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for k in 0..LANES {
            let v = chunk[k];
            let ok = v.is_finite();
            let low = if ok { v } else { f32::INFINITY };
            let high = if ok { v } else { f32::NEG_INFINITY };
            min[k] = if low < min[k] { low } else { min[k] };
            max[k] = if high > max[k] { high } else { max[k] };
            sums[k] += f64::from(if ok { v } else { 0.0 });
            finite[k] += u32::from(ok);
        }
    }
    let mut out = RewardStats {
        min: min.iter().copied().fold(f32::INFINITY, f32::min),
        max: max.iter().copied().fold(f32::NEG_INFINITY, f32::max),
        sum: sums.iter().sum(),
        finite: finite.iter().map(|&n| n as usize).sum(),
    };
    for &v in rest {
        if v.is_finite() {
            out.min = out.min.min(v);
            out.max = out.max.max(v);
            out.sum += f64::from(v);
            out.finite += 1;
        }
    }
    out
}

/// How many bytes are not zero, 64 at a time in byte counters that are added up before
/// they can overflow (vectorised: this runs three times per frame over every env).
pub(super) fn count_nonzero(bytes: &[u8]) -> u32 {
    const LANES: usize = 64;
    // 255 chunks at most per round, so that no byte counter wraps.
    const ROUND: usize = 255 * LANES;
    let mut total = 0u32;
    for round in bytes.chunks(ROUND) {
        let mut counts = [0u8; LANES];
        let chunks = round.chunks_exact(LANES);
        let rest = chunks.remainder();
        for chunk in chunks {
            for k in 0..LANES {
                counts[k] += u8::from(chunk[k] != 0);
            }
        }
        total += counts.iter().map(|&c| u32::from(c)).sum::<u32>();
        total += rest.iter().filter(|&&b| b != 0).count() as u32;
    }
    total
}

/// The overview figures of one frame: exact minimum, maximum, mean and counts over
/// every env, percentiles of the rewards over a spread sample; `scratch` is reused
/// between frames.
pub(super) fn aggregate(
    frame_seq: u64,
    t_ns: u64,
    hot: &HotData,
    latency: Option<u64>,
    scratch: &mut Vec<f32>,
) -> FrameAgg {
    // Exact minimum, maximum, mean and counts over every env; the percentiles over at
    // most PERCENTILE_SAMPLE envs spread evenly (exact below that many envs).
    let RewardStats {
        min,
        max,
        sum,
        finite,
    } = reward_stats(&hot.rewards);
    let nan_rewards = (hot.rewards.len() - finite) as u32;
    let stride = hot.rewards.len().div_ceil(PERCENTILE_SAMPLE).max(1);
    scratch.clear();
    scratch.extend(
        hot.rewards
            .iter()
            .step_by(stride)
            .copied()
            .filter(|r| r.is_finite()),
    );
    let [p10, p50, p90] =
        crate::stats::select_quantiles(scratch, [0.1, 0.5, 0.9]).unwrap_or([f32::NAN; 3]);
    let count = count_nonzero;
    FrameAgg {
        frame_seq,
        t_ns,
        reward_min: if finite == 0 { f32::NAN } else { min },
        reward_p10: p10,
        reward_p50: p50,
        reward_mean: if finite == 0 {
            f32::NAN
        } else {
            (sum / finite as f64) as f32
        },
        reward_p90: p90,
        reward_max: if finite == 0 { f32::NAN } else { max },
        dones: count(&hot.dones),
        truncateds: hot.truncateds.as_deref().map_or(0, count),
        resets: count(&hot.resets),
        nan_rewards,
        step_latency_ns: latency,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn reward_stats_match_a_plain_loop(
            values in proptest::collection::vec(
                proptest::prop_oneof![
                    8 => -1e6f32..1e6f32,
                    1 => proptest::prop_oneof![
                        proptest::strategy::Just(f32::NAN),
                        proptest::strategy::Just(f32::INFINITY),
                        proptest::strategy::Just(f32::NEG_INFINITY),
                    ],
                ],
                0..2_000,
            )
        ) {
            let s = reward_stats(&values);
            let finite: Vec<f32> = values.iter().copied().filter(|v| v.is_finite()).collect();
            proptest::prop_assert_eq!(s.finite, finite.len());
            proptest::prop_assert_eq!(s.min, finite.iter().copied().fold(f32::INFINITY, f32::min));
            proptest::prop_assert_eq!(s.max, finite.iter().copied().fold(f32::NEG_INFINITY, f32::max));
            let plain: f64 = finite.iter().map(|&v| f64::from(v)).sum();
            proptest::prop_assert!((s.sum - plain).abs() <= 1e-6 * (1.0 + plain.abs()), "{} vs {}", s.sum, plain);
        }

        #[test]
        fn nonzero_bytes_are_counted_as_a_plain_loop_does(
            bytes in proptest::collection::vec(proptest::prop_oneof![3 => proptest::strategy::Just(0u8), 1 => 0u8..=255], 0..40_000)
        ) {
            let plain = bytes.iter().filter(|&&b| b != 0).count() as u32;
            proptest::prop_assert_eq!(count_nonzero(&bytes), plain);
        }
    }
}
