//! A baseline recording for the recording shown (`open RUN --baseline BASE`, Baseline…):
//! on threads of their own, the two compared (`lrbc_recording::compare`: the Divergence
//! panel), the baseline's episodes found (the Episodes panel overlays their
//! distributions), and the baseline's values of the watched envs read for the frames the
//! plots show (the Envs panel draws them as second lines on the same time axis).
//!
//! Frames are matched by their place from each run's start: the shown run's frame
//! `frame_seq` is the baseline's `frame_seq + offset`, the offset being the difference of
//! their first frames. A live run's place is its `frame_seq` − 1 (as `compare A --shm`
//! has it): its frames are compared as the follower copies them, until the baseline's
//! last frame.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crossbeam_channel::{Receiver, Sender, bounded};
use lrbc::attach::Attached;
use lrbc::sync::lock;
use lrbc_live::episodes::{BookDetail, EpisodeBook};
use lrbc_live::follower::Subscription;
use lrbc_recording::compare::{
    AgainstBaseline, CompareCounts, Divergence, FilesCompared, LiveFrames, Tolerance, compare_files,
};
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

/// The run shown: a recording, or a live run.
#[derive(Clone, Debug)]
enum Shown {
    File(PathBuf),
    Live,
}

/// What the baseline's threads share with the window.
#[derive(Debug)]
struct Shared {
    state: BaselineState,
    /// A live comparison's counts so far.
    live_counts: Option<CompareCounts>,
    /// The baseline's episodes, once read.
    book: Option<Arc<EpisodeBook>>,
    series: Arc<BaselineSeries>,
    /// Why the series cannot be read, if so.
    series_note: Option<String>,
}

/// A baseline recording and what is known of it against the run shown.
#[derive(Debug)]
pub struct Baseline {
    pub path: PathBuf,
    shared: Arc<Mutex<Shared>>,
    requests: Sender<SeriesRequest>,
    /// The last request sent (not sent again while it is being read).
    asked: Mutex<Option<SeriesRequest>>,
    /// A live comparison's place at the follower, and the flag that stops its thread.
    live: Option<(Subscription, Arc<AtomicBool>)>,
}

impl Drop for Baseline {
    fn drop(&mut self) {
        if let Some((_, quit)) = &self.live {
            // Relaxed: a flag with no data behind it.
            quit.store(true, Ordering::Relaxed);
        }
    }
}

/// Spawns a thread named `name`.
fn spawn(name: &str, f: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map(drop)
}

impl Baseline {
    fn shared() -> Arc<Mutex<Shared>> {
        Arc::new(Mutex::new(Shared {
            state: BaselineState::Comparing(Vec::new()),
            live_counts: None,
            book: None,
            series: Arc::new(BaselineSeries::default()),
            series_note: None,
        }))
    }

    /// The baseline's episodes and the plots' requests, on threads of their own.
    fn serve(
        path: &Path,
        shown: Shown,
        shared: &Arc<Mutex<Shared>>,
        waker: &Arc<dyn Fn() + Send + Sync>,
    ) -> (Sender<SeriesRequest>, std::io::Result<()>) {
        let (requests, rx) = bounded::<SeriesRequest>(16);
        let (a, sh, wake) = (path.to_path_buf(), Arc::clone(shared), Arc::clone(waker));
        let series = spawn("lrbc-baseline-series", move || {
            serve_series(&a, &shown, &rx, &sh, &*wake);
        });
        let (a, sh, wake) = (path.to_path_buf(), Arc::clone(shared), Arc::clone(waker));
        let book = spawn("lrbc-baseline-episodes", move || {
            let book = Recording::open(&a)
                .map_err(|e| e.to_string())
                .and_then(|mut rec| {
                    recording_episodes(&mut rec, BookDetail::default(), |_| true)
                        .map_err(|e| e.to_string())
                });
            if let Ok(book) = book {
                lock(&sh).book = Some(Arc::new(book));
                wake();
            }
        });
        (requests, series.and(book))
    }

    /// Compares `shown` (run B) with the baseline `path` (run A), reads the baseline's
    /// episodes and answers the plots' requests, on threads of their own; `waker` redraws
    /// the window as results come.
    pub fn start(path: &Path, shown: &Path, waker: Arc<dyn Fn() + Send + Sync>) -> Self {
        let shared = Self::shared();
        let (a, b) = (path.to_path_buf(), shown.to_path_buf());
        let (sh, wake) = (Arc::clone(&shared), Arc::clone(&waker));
        let compared = spawn("lrbc-baseline", move || compare(&a, &b, &sh, &*wake));
        let (requests, served) =
            Self::serve(path, Shown::File(shown.to_path_buf()), &shared, &waker);
        if let Err(e) = compared.and(served) {
            lock(&shared).state =
                BaselineState::Failed(format!("cannot start the comparison: {e}"));
        }
        Self {
            path: path.to_path_buf(),
            shared,
            requests,
            asked: Mutex::new(None),
            live: None,
        }
    }

    /// Compares the live run of `attached` with the baseline `path` as the follower
    /// copies its frames (every env's values with each, within `busy_budget_percent` of a
    /// core on a busy machine), until the baseline's last frame.
    pub fn start_live(
        path: &Path,
        attached: &Attached,
        busy_budget_percent: Option<f32>,
        waker: Arc<dyn Fn() + Send + Sync>,
    ) -> Self {
        let shared = Self::shared();
        let (requests, served) = Self::serve(path, Shown::Live, &shared, &waker);
        let mut this = Self {
            path: path.to_path_buf(),
            shared: Arc::clone(&shared),
            requests,
            asked: Mutex::new(None),
            live: None,
        };
        let fail = |e: String| lock(&shared).state = BaselineState::Failed(e);
        if let Err(e) = served {
            fail(format!("cannot start the comparison: {e}"));
            return this;
        }
        let baseline = match AgainstBaseline::open(path, Tolerance::EXACT) {
            Ok(b) => b,
            Err(e) => {
                fail(e.to_string());
                return this;
            }
        };
        let g = &attached.geometry;
        // Only the envs both runs have are compared: the others' values need no copy.
        let max_envs = baseline.num_envs().min(g.num_envs as usize);
        let (sink, frames, _dropped) = LiveFrames::new(max_envs as u32, busy_budget_percent);
        let subscription = match lrbc_live::follower::subscribe(attached, Box::new(sink)) {
            Ok(s) => s,
            Err(e) => {
                fail(format!("cannot follow the segment: {e}"));
                return this;
            }
        };
        let quit = Arc::new(AtomicBool::new(false));
        let obs_size = g.obs_size as usize;
        let (q, sh) = (Arc::clone(&quit), Arc::clone(&shared));
        let started = spawn("lrbc-baseline-live", move || {
            lrbc_platform::set_thread_role(lrbc_platform::ThreadRole::Background);
            follow_live(baseline, &frames, obs_size, &q, &sh, &*waker);
        });
        if let Err(e) = started {
            fail(format!("cannot start the comparison: {e}"));
            return this;
        }
        this.live = Some((subscription, quit));
        this
    }

    /// A live comparison's counts so far (None: a recording's, or not begun).
    pub fn live_counts(&self) -> Option<CompareCounts> {
        lock(&self.shared).live_counts
    }

    /// Whether the run compared is live.
    pub fn is_live(&self) -> bool {
        self.live.is_some()
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
    lock(shared).state = match result {
        Ok(r) => BaselineState::Done(Box::new(r)),
        Err(e) => BaselineState::Failed(e.to_string()),
    };
    waker();
}

/// Compares the live frames of `frames` with `baseline` until `quit` or the baseline's
/// last frame, telling the window at each divergence and every 64 frames.
fn follow_live(
    mut baseline: AgainstBaseline,
    frames: &Receiver<Arc<lrbc_live::follower::FrameCopy>>,
    obs_size: usize,
    quit: &AtomicBool,
    shared: &Mutex<Shared>,
    waker: &(dyn Fn() + Send + Sync),
) {
    let mut since_told = 0u32;
    baseline.follow(frames, obs_size, quit, |found, b| {
        since_told += 1;
        if !found.is_empty() || since_told >= 64 || b.baseline_ended() {
            let mut s = lock(shared);
            if let BaselineState::Comparing(all) = &mut s.state {
                all.extend_from_slice(found);
            }
            s.live_counts = Some(b.counts());
            drop(s);
            since_told = 0;
            waker();
        }
        true
    });
    let result = baseline.finish();
    let mut s = lock(shared);
    s.state = match result {
        Ok(r) => {
            s.live_counts = Some(r.counts);
            BaselineState::Done(Box::new(r))
        }
        Err(e) => BaselineState::Failed(e.to_string()),
    };
    drop(s);
    waker();
}

/// The first frame's `frame_seq` of a recording, and its time span.
fn first_frame(rec: &mut Recording) -> Result<(u64, (u64, u64)), String> {
    let range = rec.time_range().ok_or("the recording holds no frame")?;
    let mut first = None;
    rec.frames_between(range.0, range.1, |f| {
        first = Some(f.frame_seq);
        false
    })
    .map_err(|e| e.to_string())?;
    Ok((first.ok_or("the recording holds no frame")?, range))
}

/// The time of the baseline's first frame at or after `frame_seq` (within `range`): a
/// binary search over time, `frame_seq` growing with it.
fn time_of(rec: &mut Recording, frame_seq: u64, range: (u64, u64)) -> Result<u64, String> {
    let (mut lo, mut hi) = range;
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let seq = rec
            .frame_at(mid)
            .map_err(|e| e.to_string())?
            .map_or(0, |f| f.frame_seq);
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
    shown: &Shown,
    requests: &Receiver<SeriesRequest>,
    shared: &Mutex<Shared>,
    waker: &(dyn Fn() + Send + Sync),
) {
    let opened = (|| {
        let mut base = Recording::open(a).map_err(|e| e.to_string())?;
        let (first_base, range) = first_frame(&mut base)?;
        let first_shown = match shown {
            Shown::File(b) => {
                let mut shown = Recording::open(b).map_err(|e| e.to_string())?;
                first_frame(&mut shown)?.0
            }
            // A live run's first step publishes frame_seq 1.
            Shown::Live => 1,
        };
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
            })
            .map_err(|e| e.to_string())?;
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
