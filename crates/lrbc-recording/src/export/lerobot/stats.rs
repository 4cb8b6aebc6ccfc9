//! The dataset's statistics (`meta/stats.json`): per feature and dimension, exact min,
//! max, mean and std, and quantiles from a deterministic sample; per colour channel for
//! the camera images.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{Features, Row};

/// Values kept per feature to estimate its quantiles (a deterministic reservoir).
const QUANTILE_SAMPLE: usize = 100_000;

/// A feature's statistics, per dimension: exact min, max, mean and std, and quantiles
/// from a deterministic sample.
struct Stats {
    dims: usize,
    min: Vec<f64>,
    max: Vec<f64>,
    sum: Vec<f64>,
    sumsq: Vec<f64>,
    count: u64,
    sample: Vec<f32>,
    state: u64,
}

impl Stats {
    fn new(dims: usize) -> Self {
        Self {
            dims,
            min: vec![f64::INFINITY; dims],
            max: vec![f64::NEG_INFINITY; dims],
            sum: vec![0.0; dims],
            sumsq: vec![0.0; dims],
            count: 0,
            sample: Vec::new(),
            state: 0x9E37_79B9_7F4A_7C15,
        }
    }

    fn push(&mut self, row: &[f32]) {
        for (d, &v) in row.iter().enumerate().take(self.dims) {
            let v = f64::from(v);
            self.min[d] = self.min[d].min(v);
            self.max[d] = self.max[d].max(v);
            self.sum[d] += v;
            self.sumsq[d] += v * v;
        }
        self.count += 1;
        // Reservoir sampling of whole rows (xorshift: the same dataset every time).
        let rows = self.sample.len() / self.dims.max(1);
        if rows < QUANTILE_SAMPLE {
            self.sample
                .extend_from_slice(&row[..self.dims.min(row.len())]);
        } else {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            let k = (self.state % self.count) as usize;
            if k < QUANTILE_SAMPLE {
                let at = k * self.dims;
                self.sample[at..at + self.dims].copy_from_slice(&row[..self.dims]);
            }
        }
    }

    fn to_json(&self) -> Value {
        let n = self.count.max(1) as f64;
        let mean: Vec<f64> = self.sum.iter().map(|s| s / n).collect();
        let std: Vec<f64> = self
            .sumsq
            .iter()
            .zip(&mean)
            .map(|(sq, m)| (sq / n - m * m).max(0.0).sqrt())
            .collect();
        let rows = self.sample.len() / self.dims.max(1);
        let q = |p: f64| -> Vec<f64> {
            (0..self.dims)
                .map(|d| {
                    let mut v: Vec<f32> =
                        (0..rows).map(|r| self.sample[r * self.dims + d]).collect();
                    v.sort_by(f32::total_cmp);
                    lrbc_live::stats::quantile(&v, p).map_or(0.0, f64::from)
                })
                .collect()
        };
        json!({
            "min": self.min, "max": self.max, "mean": mean, "std": std, "count": [self.count],
            "q01": q(0.01), "q10": q(0.10), "q50": q(0.50), "q90": q(0.90), "q99": q(0.99),
        })
    }
}

/// The statistics of the camera images, per colour channel, in [0, 1].
struct ImageStats {
    channels: [Stats; 3],
    rows: u64,
}

impl ImageStats {
    fn push(&mut self, rgb: &[u8]) {
        // Every 7th pixel: enough for the figures, and cheap.
        for p in rgb.chunks_exact(3).step_by(7) {
            for (c, s) in self.channels.iter_mut().enumerate() {
                s.push(&[f32::from(p[c]) / 255.0]);
            }
        }
    }

    fn to_json(&self) -> Value {
        let per: Vec<Value> = self.channels.iter().map(Stats::to_json).collect();
        let mut out = serde_json::Map::new();
        for k in [
            "min", "max", "mean", "std", "q01", "q10", "q50", "q90", "q99",
        ] {
            let v: Vec<Value> = per.iter().map(|p| json!([[p[k][0]]])).collect();
            out.insert(k.into(), Value::Array(v));
        }
        out.insert("count".into(), json!([self.rows]));
        Value::Object(out)
    }
}

/// The statistics of every feature of the dataset.
pub(super) struct DatasetStats {
    features: BTreeMap<&'static str, Stats>,
    image: ImageStats,
}

impl DatasetStats {
    pub(super) fn new(f: &Features) -> Self {
        let mut features = BTreeMap::new();
        if f.obs_size > 0 {
            features.insert("observation.state", Stats::new(f.obs_size));
        }
        if f.act_size > 0 {
            features.insert("action", Stats::new(f.act_size));
        }
        for k in [
            "next.reward",
            "next.done",
            "timestamp",
            "frame_index",
            "episode_index",
            "index",
            "task_index",
        ] {
            features.insert(k, Stats::new(1));
        }
        if f.truncated {
            features.insert("next.truncated", Stats::new(1));
        }
        Self {
            features,
            image: ImageStats {
                channels: [Stats::new(1), Stats::new(1), Stats::new(1)],
                rows: 0,
            },
        }
    }

    /// Counts a camera image's pixels (RGB).
    pub(super) fn push_image(&mut self, rgb: &[u8]) {
        self.image.push(rgb);
    }

    /// Counts one row of the dataset.
    pub(super) fn push_row(&mut self, row: &Row<'_>) {
        if let Some(s) = self.features.get_mut("observation.state") {
            s.push(row.obs);
        }
        if row.image.is_some() {
            self.image.rows += 1;
        }
        if let Some(s) = self.features.get_mut("action") {
            s.push(row.act);
        }
        for (k, v) in [
            ("next.reward", row.reward),
            ("next.done", f32::from(u8::from(row.done))),
            ("next.truncated", f32::from(u8::from(row.truncated))),
            ("timestamp", row.timestamp),
            ("frame_index", row.frame_index as f32),
            ("episode_index", row.episode_index as f32),
            ("index", row.index as f32),
            ("task_index", 0.0),
        ] {
            if let Some(s) = self.features.get_mut(k) {
                s.push(&[v]);
            }
        }
    }

    /// `meta/stats.json`: each feature's statistics (the camera images' if `with_image`).
    pub(super) fn to_json(&self, with_image: bool) -> Value {
        let mut stats: serde_json::Map<String, Value> = self
            .features
            .iter()
            .map(|(k, s)| ((*k).to_string(), s.to_json()))
            .collect();
        if with_image {
            stats.insert(super::IMAGE_FEATURE.into(), self.image.to_json());
        }
        Value::Object(stats)
    }
}
