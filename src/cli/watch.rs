//! `watch`: one line per interval until Ctrl-C or `--count`.

mod line;

pub use line::{
    EpisodesByEnding, EventsByKind, WatchDetector, WatchEpisodes, WatchLine, WatchLineError,
};

use super::{CliError, sleep_unless_stopped, stop_flag};
use lrbc::attach::{Target, attach};
use lrbc::clock::MonotonicClock;
use lrbc::layout::LayoutChoice;
use lrbc_live::detect::{EventKind, EventTotals};
use lrbc_live::episodes::{BookDetail, RunTotals};
use lrbc_live::rhythm::{LoopKind, RhythmSummary};
use lrbc_live::sampler::{Sampler, SamplerSettings, SamplerStats};
use lrbc_live::watch::{AttachmentWatch, Report};

fn hz(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// The loop's rhythm as `key=value` words of a watch line.
/// ` missed_late=N` after the frames missed, when some passed while the machine did not
/// run the follower when it asked to be woken.
fn late_note(late: u64) -> String {
    if late > 0 {
        format!(" missed_late={late}")
    } else {
        String::new()
    }
}

fn rhythm_words(r: &RhythmSummary) -> String {
    let pct = |v: f64| format!("{:.0}%", 100.0 * r.share(v));
    let mut w = format!(" loop={}", r.kind.as_str());
    match r.kind {
        LoopKind::Periodic => {
            if let Some(n) = r.rollout_frames {
                w.push_str(&format!(" rollout={n}"));
            }
            if let Some(u) = r.update_secs {
                w.push_str(&format!(" update={u:.2}s"));
            }
        }
        LoopKind::Learning => w.push_str(&format!(" pauses={}", r.pauses)),
        LoopKind::Continuous | LoopKind::Off => {}
    }
    if r.followed_secs > 0.0 {
        w.push_str(&format!(
            " stepping={} waiting_trainer={} waiting_engine={}",
            pct(r.stepping_secs),
            pct(r.trainer_secs),
            pct(r.engine_secs)
        ));
        if r.unknown_secs > 0.0 {
            w.push_str(&format!(" waiting_unknown={}", pct(r.unknown_secs)));
        }
    }
    if r.time_limits > 0 {
        w.push_str(&format!(" time_limits={}", r.time_limits));
    }
    if r.resets_in_step > 0 {
        w.push_str(&format!(" resets_in_step={}", r.resets_in_step));
    }
    w
}

fn line(
    r: &Report,
    s: &SamplerStats,
    yielding: bool,
    events: Option<&EventTotals>,
    rhythm: Option<&RhythmSummary>,
    episodes: Option<&RunTotals>,
) -> String {
    let mut line = format!(
        "[{:>8.1}s] {:<11} frame_seq={} action_seq={} frame_hz={} action_hz={} lag={} sampled={}/{} missed={}{} torn={} skipped={} unreadable={}",
        r.t_secs,
        r.state.as_str(),
        r.frame_seq,
        r.action_seq,
        hz(r.frame_hz),
        hz(r.action_hz),
        r.lag,
        s.frames.sampled,
        s.frames.seen,
        s.frames.missed,
        late_note(s.frames.missed_late),
        s.frames.torn,
        s.frames.skipped,
        s.frames.unreadable
    );
    if let Some(events) = events {
        line.push_str(&format!(
            " checked={}/{} events={}",
            events.frames_checked,
            s.frames.seen,
            events.events()
        ));
        for k in EventKind::ALL {
            let n = events.of(k);
            if n > 0 {
                line.push_str(&format!(" {}={n}", k.as_str()));
            }
        }
    }
    if let Some(r) = rhythm {
        line.push_str(&rhythm_words(r));
    }
    if let Some(t) = episodes {
        line.push_str(&format!(
            " episodes={} incomplete={}",
            t.finished(),
            t.incomplete
        ));
        if let (Some(r), Some(l)) = (t.mean_return(), t.mean_length()) {
            line.push_str(&format!(" mean_return={r:.3} mean_length={l:.1}"));
        }
    }
    if yielding {
        line.push_str(
            " (machine busy: the sampler skips frames to stay within its budget; --busy-budget 0 follows every frame)",
        );
    }
    if let Some(note) = &r.note {
        line.push_str(" (");
        line.push_str(note);
        line.push(')');
    }
    line
}

/// A sampler for a command's lines (`watch`, `events`, `episodes`): no env watched, no
/// history, no images (nothing shows them), the detector when `detect` is given, every
/// env's episodes kept as `episodes` says when it is given.
pub(super) fn headless_sampler(
    target: &Target,
    choice: LayoutChoice,
    busy_budget_percent: Option<f32>,
    detect: Option<lrbc_live::detect::DetectSettings>,
    episodes: Option<BookDetail>,
) -> Result<Sampler, CliError> {
    Sampler::start(
        attach(target, choice)?,
        SamplerSettings {
            watched_envs: lrbc_live::sampler::WatchedEnvs::default(),
            history_frames: 0,
            detail_frames: 1,
            max_image_hz: 0.0,
            busy_budget_percent,
            detect: detect.map(|d| (d, lrbc_live::detect::DEFAULT_EVENTS_KEPT)),
            episodes,
            ..SamplerSettings::default()
        },
        MonotonicClock,
        Box::new(|| {}),
        // Nothing to repaint: on a busy machine, ten samples a second are plenty for
        // lines printed once per interval.
        10.0,
    )
    .map_err(|e| CliError::Other(format!("cannot start the sampler: {e}")))
}

/// What `watch` prints, and how often.
#[derive(Debug)]
pub struct WatchOptions {
    pub interval: std::time::Duration,
    pub count: Option<u64>,
    pub json: bool,
    pub busy_budget_percent: Option<f32>,
    /// The detector's settings (None: no detector, no event counts).
    pub detect: Option<lrbc_live::detect::DetectSettings>,
    /// Count every env's episodes.
    pub episodes: bool,
}

pub fn run(target: &Target, choice: LayoutChoice, o: WatchOptions) -> Result<(), CliError> {
    let WatchOptions {
        interval,
        count,
        json: as_json,
        busy_budget_percent,
        detect,
        episodes,
    } = o;
    let stop = stop_flag();
    let attached = attach(target, choice)?;
    for w in &attached.geometry.warnings {
        eprintln!("warning: {w}");
    }
    // The sampler follows every frame on its own mapping, the detector beside it; their
    // figures join each line.
    // The lines print the run's totals of the episodes: nothing more is kept.
    let episodes = episodes.then_some(BookDetail::Totals);
    let sampler = headless_sampler(target, choice, busy_budget_percent, detect, episodes)?;
    let mut watcher = AttachmentWatch::new(attached, MonotonicClock);
    let mut printed = 0u64;
    while count.is_none_or(|c| printed < c) {
        if sleep_unless_stopped(interval, &stop) {
            break;
        }
        let ended = sampler.ended_threads();
        if !ended.is_empty() {
            return Err(CliError::Other(format!(
                "the sampler's thread {} stopped unexpectedly; its figures would be stale",
                ended.join(", ")
            )));
        }
        let report = watcher.tick();
        let (stats, yielding) = {
            let d = sampler.lock();
            (d.stats, d.yielding)
        };
        let (events, rhythm) = sampler.events().map_or((None, None), |l| {
            let log = lrbc::sync::lock(l);
            (Some(log.totals()), log.rhythm().cloned())
        });
        let episodes = sampler.episodes().map(|b| lrbc::sync::lock(b).totals);
        if as_json {
            let json_line = WatchLine::new(
                report,
                &stats,
                yielding,
                events.as_ref(),
                rhythm.as_ref(),
                episodes.as_ref(),
            );
            let text = serde_json::to_string(&json_line)
                .map_err(|e| CliError::Other(format!("cannot encode a report: {e}")))?;
            println!("{text}");
        } else {
            println!(
                "{}",
                line(
                    &report,
                    &stats,
                    yielding,
                    events.as_ref(),
                    rhythm.as_ref(),
                    episodes.as_ref()
                )
            );
        }
        printed += 1;
    }
    Ok(())
}
