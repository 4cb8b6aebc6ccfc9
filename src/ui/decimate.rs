//! Min/max decimation for plots: every pixel column keeps the lowest and the highest
//! point that falls on it, so a long history draws as fast as a short one and no spike
//! disappears.

/// Decimates `points` (sorted by x) to at most two points per column for `columns`
/// columns across `[x_min, x_max]`. The points just outside the range are kept so lines
/// run to the edges.
pub fn min_max(
    points: impl IntoIterator<Item = [f64; 2]>,
    x_min: f64,
    x_max: f64,
    columns: usize,
) -> Vec<[f64; 2]> {
    let columns = columns.max(1);
    let width = (x_max - x_min).max(f64::MIN_POSITIVE);
    let mut out = Vec::with_capacity(columns * 2 + 2);
    let mut before: Option<[f64; 2]> = None;
    // (column, lowest point, highest point) of the column being filled.
    let mut current: Option<(usize, [f64; 2], [f64; 2])> = None;
    let mut after: Option<[f64; 2]> = None;
    let flush = |c: Option<(usize, [f64; 2], [f64; 2])>, out: &mut Vec<[f64; 2]>| {
        if let Some((_, lo, hi)) = c {
            if lo == hi {
                out.push(lo);
            } else if lo[0] <= hi[0] {
                out.extend([lo, hi]);
            } else {
                out.extend([hi, lo]);
            }
        }
    };
    for p in points {
        if !p[1].is_finite() {
            continue;
        }
        if p[0] < x_min {
            before = Some(p);
            continue;
        }
        if p[0] > x_max {
            after = Some(p);
            break;
        }
        if let Some(b) = before.take() {
            out.push(b);
        }
        let col = ((((p[0] - x_min) / width) * columns as f64) as usize).min(columns - 1);
        match &mut current {
            Some((c, lo, hi)) if *c == col => {
                if p[1] < lo[1] {
                    *lo = p;
                }
                if p[1] > hi[1] {
                    *hi = p;
                }
            }
            _ => {
                flush(current.take(), &mut out);
                current = Some((col, p, p));
            }
        }
    }
    flush(current, &mut out);
    if let Some(a) = after {
        out.push(a);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_series_keeps_two_points_per_column_and_every_extreme() {
        let points: Vec<[f64; 2]> = (0..100_000)
            .map(|i| {
                let x = f64::from(i) / 1000.0;
                let y = if i == 54_321 { 50.0 } else { (x * 3.0).sin() };
                [x, y]
            })
            .collect();
        let out = min_max(points.iter().copied(), 0.0, 100.0, 500);
        assert!(out.len() <= 1000 + 2, "{}", out.len());
        assert!(out.iter().any(|p| p[1] == 50.0), "the spike survives");
        assert!(
            out.windows(2).all(|w| w[0][0] <= w[1][0]),
            "still sorted by x"
        );
    }

    #[test]
    fn points_outside_the_range_bracket_it() {
        let points = [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0], [3.0, 4.0], [4.0, 5.0]];
        let out = min_max(points, 1.5, 2.5, 10);
        assert_eq!(out, vec![[1.0, 2.0], [2.0, 3.0], [3.0, 4.0]]);
    }

    #[test]
    fn non_finite_values_are_skipped() {
        let out = min_max([[0.0, f64::NAN], [1.0, 1.0]], 0.0, 2.0, 4);
        assert_eq!(out, vec![[1.0, 1.0]]);
    }
}
