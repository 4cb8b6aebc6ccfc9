//! Statistics with one convention, for the sampler, the panels, the benchmarks and the
//! comparison of two runs: quantiles by nearest rank, the median, and 95 % confidence
//! intervals for a ratio, a difference of means, of shares and of counts.

/// The index of quantile `q` (0 to 1) among `len` sorted values: the nearest rank
/// `round((len − 1) · q)`. So the median of an even count is the upper middle value,
/// quantile 0 the minimum and quantile 1 the maximum. `len` must be at least 1.
pub fn rank(len: usize, q: f64) -> usize {
    let last = len.saturating_sub(1);
    ((last as f64 * q.clamp(0.0, 1.0)).round() as usize).min(last)
}

/// Quantile `q` of values sorted in ascending order; None when there are none.
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    sorted.get(rank(sorted.len(), q)).copied()
}

/// The median of values in any order (NaNs sort last); None when there are none.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    quantile(&values, 0.5)
}

/// Quantiles `qs` (in ascending order) of `values`, which it reorders, in linear time:
/// one selection per quantile, each within what the previous one left above it. None
/// when there are no values.
pub fn select_quantiles<const N: usize>(values: &mut [f32], qs: [f64; N]) -> Option<[f32; N]> {
    let len = values.len();
    if len == 0 {
        return None;
    }
    let mut out = [f32::NAN; N];
    // Everything after a selected index sorts at or after it, so the next (higher)
    // rank is found among those.
    let mut from = 0;
    for (slot, q) in out.iter_mut().zip(qs) {
        let at = rank(len, q);
        if at < from {
            // A rank already selected (a repeated or descending quantile).
            *slot = values[at];
            continue;
        }
        let (_, &mut v, _) = values[from..].select_nth_unstable_by(at - from, f32::total_cmp);
        *slot = v;
        from = at;
    }
    Some(out)
}

/// The standard normal's 97.5 % quantile: a two-sided 95 % interval's half-width in
/// standard errors, wherever a normal approximation is used.
pub const Z_975: f64 = 1.959_963_984_540_054;

/// An estimate with its 95 % confidence interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
}

/// The geometric mean of positive ratios (others are left out) with its 95 % confidence
/// interval: a normal approximation on the logarithms. One ratio gives an interval of
/// width zero; none gives None.
pub fn geometric_mean(ratios: &[f64]) -> Option<Interval> {
    let logs: Vec<f64> = ratios
        .iter()
        .filter(|r| **r > 0.0 && r.is_finite())
        .map(|r| r.ln())
        .collect();
    if logs.is_empty() {
        return None;
    }
    let n = logs.len() as f64;
    let mean = logs.iter().sum::<f64>() / n;
    let half = if logs.len() > 1 {
        let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0);
        Z_975 * (var / n).sqrt()
    } else {
        0.0
    };
    Some(Interval {
        estimate: mean.exp(),
        low: (mean - half).exp(),
        high: (mean + half).exp(),
    })
}

/// The count, mean and spread of a stream of values, one at a time (Welford's update), so
/// that a run's episodes need not be kept to be compared.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Moments {
    pub count: u64,
    pub mean: f64,
    /// The sum of squared differences from the mean.
    m2: f64,
}

impl Moments {
    /// Adds `x` (a non-finite value is the caller's to leave out).
    pub fn push(&mut self, x: f64) {
        self.count += 1;
        let d = x - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Adds every value `other` holds (Chan's parallel update).
    pub fn merge(&mut self, other: &Self) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        let n = (self.count + other.count) as f64;
        let d = other.mean - self.mean;
        let (na, nb) = (self.count as f64, other.count as f64);
        self.mean += d * nb / n;
        self.m2 += other.m2 + d * d * na * nb / n;
        self.count += other.count;
    }

    /// The mean, None without values.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then_some(self.mean)
    }

    /// The sample variance (n − 1), None below two values.
    pub fn variance(&self) -> Option<f64> {
        (self.count > 1).then(|| self.m2.max(0.0) / (self.count - 1) as f64)
    }
}

/// The 97.5 % quantile of Student's t with `df` degrees of freedom (two-sided 95 %):
/// exact to three decimals for whole `df` up to 30 (a fractional `df` takes the whole
/// number below it, which errs wide), a Cornish–Fisher expansion above.
pub fn t_975(df: f64) -> f64 {
    const TABLE: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    if df.is_nan() || df < 1.0 {
        return f64::INFINITY;
    }
    if df < 31.0 {
        return TABLE[(df.floor() as usize).clamp(1, 30) - 1];
    }
    let z = Z_975;
    let (z3, z5, z7) = (z.powi(3), z.powi(5), z.powi(7));
    z + (z3 + z) / (4.0 * df)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * df * df)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * df.powi(3))
}

/// B's mean minus A's with its 95 % interval by Welch's t (no equal variances assumed;
/// the values are taken as independent). None unless each has two values or more.
pub fn mean_difference(a: &Moments, b: &Moments) -> Option<Interval> {
    let (va, vb) = (a.variance()?, b.variance()?);
    let (na, nb) = (a.count as f64, b.count as f64);
    let (sa, sb) = (va / na, vb / nb);
    let se2 = sa + sb;
    let estimate = b.mean - a.mean;
    if se2 == 0.0 {
        return Some(Interval {
            estimate,
            low: estimate,
            high: estimate,
        });
    }
    let df = se2 * se2 / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0));
    let half = t_975(df) * se2.sqrt();
    Some(Interval {
        estimate,
        low: estimate - half,
        high: estimate + half,
    })
}

/// Wilson's 95 % score interval of the share `k` of `n`.
fn wilson(k: u64, n: u64) -> (f64, f64) {
    let z = Z_975;
    let (k, n) = (k as f64, n as f64);
    let p = k / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// B's share `kb / nb` minus A's `ka / na` with its 95 % interval by Newcombe's hybrid
/// score method (from each share's Wilson interval), which stays inside −1 to 1 and
/// holds near 0 and 1. None when either has no values.
pub fn share_difference(ka: u64, na: u64, kb: u64, nb: u64) -> Option<Interval> {
    if na == 0 || nb == 0 {
        return None;
    }
    let (pa, pb) = (ka as f64 / na as f64, kb as f64 / nb as f64);
    let (la, ua) = wilson(ka, na);
    let (lb, ub) = wilson(kb, nb);
    let estimate = pb - pa;
    Some(Interval {
        estimate,
        low: estimate - ((pb - lb).powi(2) + (ua - pa).powi(2)).sqrt(),
        high: estimate + ((ub - pb).powi(2) + (pa - la).powi(2)).sqrt(),
    })
}

/// B's count minus A's with its 95 % interval, each taken as a Poisson count (normal
/// approximation: ± 1.96 √(a + b)).
pub fn count_difference(a: u64, b: u64) -> Interval {
    let estimate = b as f64 - a as f64;
    let half = Z_975 * ((a + b) as f64).sqrt();
    Interval {
        estimate,
        low: estimate - half,
        high: estimate + half,
    }
}

impl Interval {
    /// The interval lies wholly above 0 (Some(true)), wholly below (Some(false)), or holds
    /// it (None).
    pub fn sign(&self) -> Option<bool> {
        if self.low > 0.0 {
            Some(true)
        } else if self.high < 0.0 {
            Some(false)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_nearest_ranks_and_the_median_of_an_even_count_is_the_upper_middle() {
        let v = [10, 20, 30, 40];
        assert_eq!(quantile(&v, 0.0), Some(10));
        assert_eq!(quantile(&v, 0.5), Some(30));
        assert_eq!(quantile(&v, 1.0), Some(40));
        assert_eq!(quantile(&v, 0.99), Some(40));
        assert_eq!(quantile(&[7], 0.9), Some(7));
        assert_eq!(quantile::<u64>(&[], 0.5), None);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), Some(3.0));
        assert_eq!(median(Vec::new()), None);
        // Out-of-range quantiles are clamped, not an index out of bounds.
        assert_eq!(quantile(&v, 7.0), Some(40));
        assert_eq!(quantile(&v, -1.0), Some(10));
    }

    #[test]
    fn the_ratio_is_the_geometric_mean_with_an_interval_that_narrows_with_more_ratios() {
        let i = geometric_mean(&[0.5, 2.0]).unwrap();
        assert!((i.estimate - 1.0).abs() < 1e-12, "{i:?}");
        assert!(i.low < 0.5 && i.high > 2.0, "{i:?}");
        let i = geometric_mean(&[0.98; 10]).unwrap();
        assert!((i.estimate - 0.98).abs() < 1e-12);
        assert!((i.low - 0.98).abs() < 1e-12 && (i.high - 0.98).abs() < 1e-12);
        let few = geometric_mean(&[0.9, 1.1].repeat(4)).unwrap();
        let many = geometric_mean(&[0.9, 1.1].repeat(100)).unwrap();
        assert!((few.estimate - many.estimate).abs() < 1e-12);
        assert!(many.high - many.low < (few.high - few.low) / 4.0);
        assert_eq!(geometric_mean(&[]), None);
        assert_eq!(geometric_mean(&[0.0, -1.0, f64::NAN]), None);
        let one = geometric_mean(&[1.5]).unwrap();
        assert_eq!((one.low, one.high), (one.estimate, one.estimate));
    }

    /// A small seeded generator for the coverage test (xorshift64*, Box–Muller).
    struct Normal(u64);

    impl Normal {
        fn uniform(&mut self) -> f64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            ((self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        }

        fn sample(&mut self, mean: f64, sd: f64) -> f64 {
            let (u, v) = (self.uniform(), self.uniform());
            mean + sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        }
    }

    #[test]
    fn moments_streamed_and_merged_are_those_of_all_the_values() {
        let values = [3.0, -1.5, 7.25, 0.0, 2.5, 2.5, 10.0];
        let mut all = Moments::default();
        values.iter().for_each(|v| all.push(*v));
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        assert_eq!(all.count, 7);
        assert!((all.mean - mean).abs() < 1e-12 && (all.variance().unwrap() - var).abs() < 1e-12);
        let (mut left, mut right) = (Moments::default(), Moments::default());
        values[..3].iter().for_each(|v| left.push(*v));
        values[3..].iter().for_each(|v| right.push(*v));
        left.merge(&right);
        assert_eq!(left.count, all.count);
        assert!((left.mean - all.mean).abs() < 1e-12);
        assert!((left.variance().unwrap() - var).abs() < 1e-12);
        let mut empty = Moments::default();
        empty.merge(&all);
        assert_eq!(empty, all);
        assert_eq!(Moments::default().mean(), None);
        let mut one = Moments::default();
        one.push(4.0);
        assert_eq!((one.mean(), one.variance()), (Some(4.0), None));
    }

    #[test]
    fn t_quantiles_are_the_tabled_ones_and_tend_to_the_normal() {
        assert!((t_975(1.0) - 12.706).abs() < 1e-9);
        assert!((t_975(10.0) - 2.228).abs() < 1e-9);
        // A fractional df errs wide: the whole number below.
        assert!((t_975(10.7) - 2.228).abs() < 1e-9);
        // Above the table, within a thousandth of the published values.
        for (df, t) in [(40.0, 2.021), (60.0, 2.000), (120.0, 1.980), (1e6, 1.960)] {
            assert!((t_975(df) - t).abs() < 1e-3, "df {df}: {}", t_975(df));
        }
        assert!(t_975(31.0) < t_975(30.0));
        assert_eq!(t_975(0.5), f64::INFINITY);
        assert_eq!(t_975(f64::NAN), f64::INFINITY);
    }

    #[test]
    fn welch_s_interval_holds_the_true_difference_about_95_times_in_100() {
        let mut rng = Normal(0x9E37_79B9_7F4A_7C15);
        let trials = 2000u32;
        let mut held = 0u32;
        for _ in 0..trials {
            let (mut a, mut b) = (Moments::default(), Moments::default());
            // Unequal counts and spreads: Welch's case.
            (0..12).for_each(|_| a.push(rng.sample(5.0, 1.0)));
            (0..30).for_each(|_| b.push(rng.sample(5.5, 3.0)));
            let i = mean_difference(&a, &b).unwrap();
            held += u32::from(i.low <= 0.5 && 0.5 <= i.high);
        }
        let share = f64::from(held) / f64::from(trials);
        assert!((0.93..=0.97).contains(&share), "coverage {share}");
    }

    #[test]
    fn a_clear_shift_is_told_and_equal_runs_are_not_distinguished() {
        let (mut a, mut b, mut same) = (Moments::default(), Moments::default(), Moments::default());
        for k in 0..50 {
            let x = f64::from(k % 7);
            a.push(x);
            same.push(x);
            b.push(x + 3.0);
        }
        let up = mean_difference(&a, &b).unwrap();
        assert!((up.estimate - 3.0).abs() < 1e-12);
        assert_eq!(up.sign(), Some(true));
        assert_eq!(mean_difference(&b, &a).unwrap().sign(), Some(false));
        let none = mean_difference(&a, &same).unwrap();
        assert_eq!(none.estimate, 0.0);
        assert_eq!(none.sign(), None);
        assert!(none.low < 0.0 && none.high > 0.0);
        // Constant values: no spread, the interval is the difference itself.
        let (mut c, mut d) = (Moments::default(), Moments::default());
        (0..3).for_each(|_| c.push(1.0));
        (0..3).for_each(|_| d.push(2.0));
        let i = mean_difference(&c, &d).unwrap();
        assert_eq!((i.low, i.estimate, i.high), (1.0, 1.0, 1.0));
        let mut one = Moments::default();
        one.push(1.0);
        assert_eq!(mean_difference(&one, &a), None);
    }

    #[test]
    fn share_differences_stay_within_minus_one_and_one_and_match_newcombe_s_example() {
        // Newcombe (1998), example (a): 56/70 against 48/80, difference 0.2, interval
        // 0.0524 to 0.3339 (method 10).
        let i = share_difference(48, 80, 56, 70).unwrap();
        assert!((i.estimate - 0.2).abs() < 1e-12);
        assert!(
            (i.low - 0.0524).abs() < 5e-4 && (i.high - 0.3339).abs() < 5e-4,
            "{i:?}"
        );
        let all = share_difference(0, 10, 10, 10).unwrap();
        assert!(all.low > 0.0 && all.high <= 1.0, "{all:?}");
        let none = share_difference(5, 10, 5, 10).unwrap();
        assert_eq!(none.sign(), None);
        assert_eq!(share_difference(0, 0, 1, 2), None);
    }

    #[test]
    fn count_differences_widen_with_the_counts() {
        let i = count_difference(100, 100);
        assert_eq!(i.estimate, 0.0);
        assert!((i.high - 1.96 * 200f64.sqrt()).abs() < 1e-2);
        assert_eq!(count_difference(100, 200).sign(), Some(true));
        assert_eq!(count_difference(0, 0).sign(), None);
    }

    proptest::proptest! {
        #[test]
        fn selected_quantiles_are_those_of_the_sorted_values(
            values in proptest::collection::vec(-1e3f32..1e3f32, 0..600),
            mut qs in proptest::array::uniform3(0.0f64..=1.0),
        ) {
            qs.sort_by(f64::total_cmp);
            let mut sorted = values.clone();
            sorted.sort_by(f32::total_cmp);
            let mut work = values.clone();
            let got = select_quantiles(&mut work, qs);
            if sorted.is_empty() {
                proptest::prop_assert_eq!(got, None);
            } else {
                let want = qs.map(|q| quantile(&sorted, q).unwrap_or(f32::NAN));
                proptest::prop_assert_eq!(got, Some(want));
            }
        }
    }
}
