//! Tests over many `f32`s at once, vectorised: the baseline's SSE2 everywhere, AVX2
//! where the CPU has it (detected at run time; a program built for the baseline runs on
//! any x86-64).

/// Whether every value lies within its bound (NaN never does); `lo` and `hi` at least
/// as long as `values`.
pub fn all_within(values: &[f32], lo: &[f32], hi: &[f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above), all that the function needs
        // beyond the baseline.
        return unsafe { all_within_avx2(values, lo, hi) };
    }
    all_within_lanes(values, lo, hi)
}

/// [`all_within_lanes`] compiled for AVX2: twice the lanes of the baseline's SSE2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn all_within_avx2(values: &[f32], lo: &[f32], hi: &[f32]) -> bool {
    all_within_lanes(values, lo, hi)
}

/// Branch-free, so that it vectorises (one `or` of every value's verdict: a NaN is
/// never within); the caller branches once per block.
#[inline(always)]
fn all_within_lanes(values: &[f32], lo: &[f32], hi: &[f32]) -> bool {
    let n = values.len().min(lo.len()).min(hi.len());
    let (values, lo, hi) = (&values[..n], &lo[..n], &hi[..n]);
    let outside = values
        .iter()
        .zip(lo)
        .zip(hi)
        .fold(0u32, |a, ((&x, &l), &h)| {
            a | u32::from(!((x >= l) & (x <= h)))
        });
    outside == 0
}

/// Whether every value is finite.
pub fn all_finite(values: &[f32]) -> bool {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (detected just above), all that the function needs
        // beyond the baseline.
        return unsafe { all_finite_avx2(values) };
    }
    all_finite_lanes(values)
}

/// [`all_finite_lanes`] compiled for AVX2: twice the lanes of the baseline's SSE2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn all_finite_avx2(values: &[f32]) -> bool {
    all_finite_lanes(values)
}

/// On the bits as integers, without a comparison: adding 1 to an exponent of all ones
/// (and nothing to any other) carries into the top bit, which one `or` over every value
/// gathers (contiguous values to a vector register, as the compiler vectorises it).
#[inline(always)]
fn all_finite_lanes(values: &[f32]) -> bool {
    const EXPONENT: u32 = 0x7f80_0000;
    const ONE: u32 = 0x0080_0000;
    let carry = values
        .iter()
        .fold(0u32, |a, v| a | ((v.to_bits() & EXPONENT) + ONE));
    carry & 0x8000_0000 == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test of values against their bounds.
    type Within = fn(&[f32], &[f32], &[f32]) -> bool;

    /// Every path (the portable one, and the one the CPU picks) on every length up to
    /// a few vectors, with each bad value at each place.
    #[test]
    fn every_path_finds_each_bad_value_at_each_place() {
        let paths_finite: [fn(&[f32]) -> bool; 2] = [all_finite, all_finite_lanes];
        let paths_within: [Within; 2] = [all_within, all_within_lanes];
        for len in 0..70usize {
            let good: Vec<f32> = (0..len).map(|i| i as f32 * 0.5 - 10.0).collect();
            let lo = vec![-10.0f32; len];
            let hi = vec![25.0f32; len];
            for f in paths_finite {
                assert!(f(&good), "len {len}");
            }
            for w in paths_within {
                assert!(w(&good, &lo, &hi), "len {len}");
            }
            for at in 0..len {
                for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -f32::NAN] {
                    let mut v = good.clone();
                    v[at] = bad;
                    for f in paths_finite {
                        assert!(!f(&v), "len {len}, {bad} at {at}");
                    }
                    for w in paths_within {
                        assert!(!w(&v, &lo, &hi), "len {len}, {bad} at {at}");
                    }
                }
                for (out, finite) in [(-10.5f32, true), (25.5, true), (f32::MAX, true)] {
                    let mut v = good.clone();
                    v[at] = out;
                    for f in paths_finite {
                        assert_eq!(f(&v), finite);
                    }
                    for w in paths_within {
                        assert!(!w(&v, &lo, &hi), "len {len}, {out} at {at}");
                    }
                }
                // The bounds themselves are within.
                let mut v = good.clone();
                v[at] = if at % 2 == 0 { -10.0 } else { 25.0 };
                for w in paths_within {
                    assert!(w(&v, &lo, &hi), "len {len}, a bound at {at}");
                }
            }
        }
    }
}
