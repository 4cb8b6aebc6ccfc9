//! A baseline recording for the recording shown (`open RUN --baseline BASE`, Baseline…):
//! on threads of their own, the two compared (`lrbc_recording::compare`: the Divergence
//! panel), the baseline's episodes found (the Episodes panel overlays their
//! distributions), and the baseline's values of the watched envs read for the frames the
//! plots show (the Envs panel draws them as second lines on the same time axis).
//!
//! Frames are matched by their place from each run's start: the shown run's frame
//! `frame_seq` is the baseline's `frame_seq + offset`, the offset being the difference of
//! their first frames.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, bounded};
use lrbc::sync::lock;
use lrbc_live::episodes::{DEFAULT_EPISODES_KEPT, EpisodeBook};
use lrbc_recording::compare::{Divergence, FilesCompared, Tolerance, compare_files};
use lrbc_recording::replay::{Recording, recording_episodes};

/// The most frames of the baseline read for one view of the plots.
const MAX_SERIES_FRAMES: u64 = 200_000;

/// Where the comparison with the baseline stands.
#[derive(Clone, Debug)]
pub enum BaselineState {
    /// Under way: the divergences found so far.
    Comparing(Vec<Divergence>),
    Done(Box<FilesCompared>),
    Failed(String),
}

/// The baseline's values of one env at one frame, placed at the shown run's frame.
#[derive(Clone, Debug, PartialEq)]
pub struct BaselinePoint {
    /// The shown run's `frame_seq` at the same place.
    pub frame_seq: u64,
    pub reward: f32,
    /// Observations then actions (None: the baseline did not record the env's values).
    pub values: Option<Box<[f32]>>,
}

/// The baseline's values read for a span of the shown run's frames.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BaselineSeries {
    /// The shown run's frames the series covers, inclusive.
    pub span: (u64, u64),
    /// By env, in frame order.
    pub envs: BTreeMap<u32, Vec<BaselinePoint>>,
}

impl BaselineSeries {
    /// Whether it covers `envs` over the shown run's frames `from..=to`.
    fn covers(&self, envs: &[u32], from: u64, to: u64) -> bool {
        self.span.0 <= from && to <= self.span.1 && envs.iter().all(|e| self.envs.contains_key(e))
    }
}

/// A span of the shown run's frames and the envs wanted there.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SeriesRequest {
    envs: Vec<u32>,
    from: u64,
    to: u64,
}

/// What the baseline's threads share with the window.
#[derive(Debug)]
struct Shared {
    state: BaselineState,
    /// The baseline's episodes, once read.
    book: Option<Arc<EpisodeBook>>,
    series: Arc<BaselineSeries>,
    /// Why the series cannot be read, if so.
    series_note: Option<String>,
}

/// A baseline recording and what is known of it against the recording shown.
#[derive(Debug)]
pub struct Baseline {
    pub path: PathBuf,
    shared: Arc<Mutex<Shared>>,
    requests: Sender<SeriesRequest>,
    /// The last request sent (not sent again while it is being read).
    asked: Mutex<Option<SeriesRequest>>,
}

impl Baseline {
    /// Compares `shown` (run B) with the baseline `path` (run A), reads the baseline's
    /// episodes and answers the plots' requests, on threads of their own; `waker` redraws
    /// the window as results come.
    pub fn start(path: &Path, shown: &Path, waker: Arc<dyn Fn() + Send + Sync>) -> Self {
        let shared = Arc::new(Mutex::new(Shared {
            state: BaselineState::Comparing(Vec::new()),
            book: None,
            series: Arc::new(BaselineSeries::default()),
            series_note: None,
        }));
        let (requests, rx) = bounded::<SeriesRequest>(16);
        let (a, b) = (path.to_path_buf(), shown.to_path_buf());
        let (sh, wake) = (Arc::clone(&shared), Arc::clone(&waker));
        let compared = std::thread::Builder::new()
            .name("lrbc-baseline".into())
            .spawn(move || compare(&a, &b, &sh, &*wake));
        let (a, b) = (path.to_path_buf(), shown.to_path_buf());
        let (sh, wake) = (Arc::clone(&shared), waker);
        let series = std::thread::Builder::new()
            .name("lrbc-baseline-series".into())
            .spawn(move || serve_series(&a, &b, &rx, &sh, &*wake));
        if let Err(e) = compared.and(series) {
            lock(&shared).state =
                BaselineState::Failed(format!("cannot start the comparison: {e}"));
        }
        Self {
            path: path.to_path_buf(),
            shared,
            requests,
            asked: Mutex::new(None),
        }
    }

    /// Where the comparison stands now.
    pub fn state(&self) -> BaselineState {
        lock(&self.shared).state.clone()
    }

    /// The baseline's episodes, once read.
    pub fn book(&self) -> Option<Arc<EpisodeBook>> {
        lock(&self.shared).book.clone()
    }

    /// The baseline's values of the watched envs read so far, and why they cannot be read
    /// if so.
    pub fn series(&self) -> (Arc<BaselineSeries>, Option<String>) {
        let s = lock(&self.shared);
        (Arc::clone(&s.series), s.series_note.clone())
    }

    /// Asks for the baseline's values of `envs` over the shown run's frames `from..=to`
    /// (with a margin on each side, so that a view moving a little asks nothing new).
    pub fn want(&self, envs: &[u32], from: u64, to: u64) {
        let (series, _) = self.series();
        if from > to || series.covers(envs, from, to) {
            return;
        }
        let margin = (to - from) / 2;
        let request = SeriesRequest {
            envs: envs.to_vec(),
            from: from.saturating_sub(margin),
            to: to.saturating_add(margin),
        };
        let mut asked = lock(&self.asked);
        if asked
            .as_ref()
            .is_some_and(|a| a.envs == request.envs && a.from <= from && to <= a.to)
        {
            return;
        }
        // A full queue: the reader is behind, and asks for the newest when it looks.
        if self.requests.try_send(request.clone()).is_ok() {
            *asked = Some(request);
        }
    }
}

fn compare(a: &Path, b: &Path, shared: &Mutex<Shared>, waker: &(dyn Fn() + Send + Sync)) {
    let result = compare_files(a, b, Tolerance::EXACT, false, |d| {
        if let BaselineState::Comparing(found) = &mut lock(shared).state {
            found.push(*d);
        }
        waker();
    });
    let failed = result.is_err();
    lock(shared).state = match result {
        Ok(r) => BaselineState::Done(Box::new(r)),
        Err(e) => BaselineState::Failed(e.to_string()),
    };
    waker();
    if failed {
        return;
    }
    let book = Recording::open(a)
        .map_err(|e| e.to_string())
        .and_then(|mut rec| recording_episodes(&mut rec, DEFAULT_EPISODES_KEPT, |_| true));
    if let Ok(book) = book {
        lock(shared).book = Some(Arc::new(book));
        waker();
    }
}

/// The first frame's `frame_seq` of a recording, and its time span.
fn first_frame(rec: &mut Recording) -> Result<(u64, (u64, u64)), String> {
    let range = rec.time_range().ok_or("the recording holds no frame")?;
    let mut first = None;
    rec.frames_between(range.0, range.1, |f| {
        first = Some(f.frame_seq);
        false
    })?;
    Ok((first.ok_or("the recording holds no frame")?, range))
}

/// The time of the baseline's first frame at or after `frame_seq` (within `range`): a
/// binary search over time, `frame_seq` growing with it.
fn time_of(rec: &mut Recording, frame_seq: u64, range: (u64, u64)) -> Result<u64, String> {
    let (mut lo, mut hi) = range;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let seq = rec.frame_at(mid)?.map_or(0, |f| f.frame_seq);
        if seq < frame_seq {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// Answers the plots' requests until the window lets go of the baseline.
fn serve_series(
    a: &Path,
    b: &Path,
    requests: &Receiver<SeriesRequest>,
    shared: &Mutex<Shared>,
    waker: &(dyn Fn() + Send + Sync),
) {
    let opened = (|| {
        let mut base = Recording::open(a).map_err(|e| e.to_string())?;
        let mut shown = Recording::open(b).map_err(|e| e.to_string())?;
        let (first_base, range) = first_frame(&mut base)?;
        let (first_shown, _) = first_frame(&mut shown)?;
        Ok::<_, String>((base, first_base, first_shown, range))
    })();
    let (mut base, first_base, first_shown, range) = match opened {
        Ok(o) => o,
        Err(e) => {
            lock(shared).series_note = Some(e);
            waker();
            return;
        }
    };
    // The baseline's frame_seq of the shown run's `seq`, and back.
    let to_base = |seq: u64| (seq + first_base).saturating_sub(first_shown);
    let to_shown = |seq: u64| (seq + first_shown).saturating_sub(first_base);
    while let Ok(mut req) = requests.recv() {
        // Only the newest request matters.
        while let Ok(newer) = requests.try_recv() {
            req = newer;
        }
        let to = req.to.min(req.from.saturating_add(MAX_SERIES_FRAMES));
        let (from_b, to_b) = (to_base(req.from), to_base(to));
        let read = (|| {
            let t0 = time_of(&mut base, from_b, range)?;
            let t1 = time_of(&mut base, to_b.saturating_add(1), range)?;
            let mut envs: BTreeMap<u32, Vec<BaselinePoint>> =
                req.envs.iter().map(|&e| (e, Vec::new())).collect();
            base.frames_between(t0, t1, |f| {
                if f.frame_seq < from_b || f.frame_seq > to_b {
                    return f.frame_seq <= to_b;
                }
                let row = f.obs_size + f.act_size;
                for (&env, points) in &mut envs {
                    let Some(&reward) = f.rewards.get(env as usize) else {
                        continue;
                    };
                    let values = f.envs.binary_search(&env).ok().and_then(|k| {
                        let obs = f.observations.get(k * f.obs_size..(k + 1) * f.obs_size)?;
                        let act = f.actions.get(k * f.act_size..(k + 1) * f.act_size)?;
                        let mut v = Vec::with_capacity(row);
                        v.extend_from_slice(obs);
                        v.extend_from_slice(act);
                        Some(v.into_boxed_slice())
                    });
                    points.push(BaselinePoint {
                        frame_seq: to_shown(f.frame_seq),
                        reward,
                        values,
                    });
                }
                true
            })?;
            Ok::<_, String>(envs)
        })();
        let mut s = lock(shared);
        match read {
            Ok(envs) => {
                s.series = Arc::new(BaselineSeries {
                    span: (req.from, to),
                    envs,
                });
                s.series_note = None;
            }
            Err(e) => s.series_note = Some(e),
        }
        drop(s);
        waker();
    }
}
