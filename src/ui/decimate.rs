//! Min/max decimation for plots: every pixel column keeps the lowest and the highest
//! point that falls on it, so a long history draws as fast as a short one and no spike
//! disappears.

use std::collections::VecDeque;

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

/// One column of a series: its lowest and highest point (time in ns, value).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bucket {
    index: u64,
    lo: (u64, f32),
    hi: (u64, f32),
}

/// A series decimated incrementally: points go into fixed-width time buckets as they
/// arrive, so a frame costs the new points, not the whole history.
#[derive(Clone, Debug, Default)]
pub struct Series {
    width_ns: u64,
    last_t_ns: u64,
    buckets: VecDeque<Bucket>,
}

impl Series {
    /// Adds points newer than the last one seen (`points` in time order), with buckets
    /// `width_ns` wide; a different width starts over. Drops buckets before `keep_from_ns`.
    pub fn update(
        &mut self,
        width_ns: u64,
        keep_from_ns: u64,
        points: impl IntoIterator<Item = (u64, f32)>,
    ) {
        let width_ns = width_ns.max(1);
        if width_ns != self.width_ns {
            self.width_ns = width_ns;
            self.last_t_ns = 0;
            self.buckets.clear();
        }
        for (t, v) in points {
            if t <= self.last_t_ns && self.last_t_ns != 0 {
                continue;
            }
            self.last_t_ns = t;
            if !v.is_finite() {
                continue;
            }
            let index = t / width_ns;
            match self.buckets.back_mut() {
                Some(b) if b.index == index => {
                    if v < b.lo.1 {
                        b.lo = (t, v);
                    }
                    if v > b.hi.1 {
                        b.hi = (t, v);
                    }
                }
                _ => self.buckets.push_back(Bucket {
                    index,
                    lo: (t, v),
                    hi: (t, v),
                }),
            }
        }
        while self
            .buckets
            .front()
            .is_some_and(|b| (b.index + 1) * width_ns < keep_from_ns)
        {
            self.buckets.pop_front();
        }
    }

    /// The time of the newest point added with buckets `width_ns` wide, or 0 when the
    /// width changed (the plot was resized): the caller then feeds the whole history
    /// again, so that a resize never loses what was plotted.
    pub fn resume_from(&mut self, width_ns: u64) -> u64 {
        let width_ns = width_ns.max(1);
        if width_ns != self.width_ns {
            self.width_ns = width_ns;
            self.last_t_ns = 0;
            self.buckets.clear();
        }
        self.last_t_ns
    }

    /// The decimated points as `[seconds relative to now_ns, value]`.
    pub fn points(&self, now_ns: u64) -> Vec<[f64; 2]> {
        let x = |t: u64| (t as f64 - now_ns as f64) / 1e9;
        let mut out = Vec::with_capacity(self.buckets.len() * 2);
        for b in &self.buckets {
            let (first, second) = if b.lo.0 <= b.hi.0 {
                (b.lo, b.hi)
            } else {
                (b.hi, b.lo)
            };
            out.push([x(first.0), f64::from(first.1)]);
            if second != first {
                out.push([x(second.0), f64::from(second.1)]);
            }
        }
        out
    }
}

/// Series by name, kept between frames.
#[derive(Clone, Debug, Default)]
pub struct SeriesCache {
    series: std::collections::HashMap<String, Series>,
    generation: u64,
}

impl SeriesCache {
    /// The series named `key`; all series start over when `generation` changes (a new
    /// segment).
    pub fn get(&mut self, key: &str, generation: u64) -> &mut Series {
        if generation != self.generation {
            self.generation = generation;
            self.series.clear();
        }
        self.series.entry(key.to_string()).or_default()
    }

    /// Forgets series not in `keep`.
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) {
        self.series.retain(|k, _| keep(k));
    }
}

#[cfg(test)]
mod series_tests {
    use super::*;

    #[test]
    fn incremental_buckets_keep_every_extreme_and_drop_old_ones() {
        let mut s = Series::default();
        let pts: Vec<(u64, f32)> = (1..=1000u64)
            .map(|i| (i * 1_000_000, if i == 500 { 99.0 } else { (i % 7) as f32 }))
            .collect();
        s.update(10_000_000, 0, pts[..600].iter().copied());
        s.update(10_000_000, 0, pts[600..].iter().copied());
        // Feeding the same points again adds nothing.
        s.update(10_000_000, 0, pts.iter().copied());
        let out = s.points(1_000_000_000);
        assert!(out.len() <= 2 * 101, "{}", out.len());
        assert!(out.iter().any(|p| p[1] == 99.0));
        assert!(out.windows(2).all(|w| w[0][0] <= w[1][0]));
        s.update(10_000_000, 900_000_000, std::iter::empty());
        assert!(s.points(1_000_000_000).iter().all(|p| p[0] >= -0.11));
    }

    #[test]
    fn a_new_width_asks_for_the_whole_history_again() {
        let mut s = Series::default();
        let pts: Vec<(u64, f32)> = (1..=100u64).map(|i| (i * 1_000_000, i as f32)).collect();
        assert_eq!(s.resume_from(10_000_000), 0);
        s.update(10_000_000, 0, pts.iter().copied());
        assert_eq!(s.resume_from(10_000_000), 100_000_000);
        // The plot got narrower: everything is fed again and nothing is lost.
        let from = s.resume_from(20_000_000);
        assert_eq!(from, 0);
        s.update(20_000_000, 0, pts.iter().copied().filter(|p| p.0 > from));
        let out = s.points(100_000_000);
        assert_eq!(out.first().map(|p| p[1]), Some(1.0));
        assert_eq!(out.last().map(|p| p[1]), Some(100.0));
    }
}
