//! Statistics with one convention, for the sampler, the panels and the benchmarks:
//! quantiles by nearest rank, the median, and a confidence interval for a ratio.

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
        1.96 * (var / n).sqrt()
    } else {
        0.0
    };
    Some(Interval {
        estimate: mean.exp(),
        low: (mean - half).exp(),
        high: (mean + half).exp(),
    })
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
