//! `episodes`: every env's episodes of a live run as they end, or of a recording. One
//! line per episode (`--json`: one object) in the order they ended; at the end, those
//! going on (ending `running`) and the totals on stderr.

use std::path::Path;
use std::time::Duration;

use super::looking::look_until_done;
use super::{CliError, stop_flag};
use lrbc::attach::{Target, attach};
use lrbc::layout::LayoutChoice;
use lrbc::sync::lock;
use lrbc_live::detect::format_value;
use lrbc_live::episodes::{BookDetail, Ending, Episode, EpisodeBook, RunTotals};
use lrbc_live::text::plural;
use lrbc_live::text::thousands;

/// The options of `episodes`.
#[derive(Debug, clap::Args)]
pub struct EpisodesArgs {
    /// A recording to list the episodes of, instead of a live run.
    #[arg(value_name = "FILE.mcap", conflicts_with_all = ["shm", "pid", "path"])]
    pub file: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub target: super::TargetArgs,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Stop a live run after this many seconds (units ms, s, min, h allowed).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = super::args::positive_seconds)]
    pub secs: Option<Duration>,
    /// Stop a live run after this many episodes ended (at least 1).
    #[arg(long, value_name = "N", value_parser = super::args::parse_count)]
    pub count: Option<u64>,
    /// While the machine has no spare CPU, the follower's whole copies keep within this
    /// percent of one core; every frame's rewards and flags are read whatever the load.
    #[arg(long, value_name = "PCT", default_value_t = lrbc_live::busy::DEFAULT_BUSY_BUDGET_PERCENT, allow_negative_numbers = true, value_parser = super::args::parse_percent)]
    pub busy_budget: f32,
}

/// One episode as a line: env, frames, length, return (marked `~` unless exact), ending.
pub fn line(e: &Episode, t0_ns: u64) -> String {
    let t = e.last_ns.saturating_sub(t0_ns) as f64 / 1e9;
    let ret = if e.complete() {
        format_value(e.ret)
    } else {
        format!("~{}", format_value(e.ret))
    };
    let mut line = format!(
        "{t:>10.3} s  env {:<5} frames {}–{} ({} frame{})  return {ret}  {}",
        e.env,
        e.first_frame,
        e.last_frame,
        e.length(),
        plural(e.length()),
        e.ending.as_str(),
    );
    if e.began_before {
        line.push_str(" (began before the first frame followed)");
    } else if e.lacking > 0 {
        line.push_str(&format!(
            " (incomplete: {} frame{} not taken)",
            thousands(e.lacking),
            plural(e.lacking),
        ));
    }
    if let Some(f) = e.nonfinite_frame {
        line.push_str(&format!(" (non-finite value at frame {f})"));
    }
    line
}

fn print(e: &Episode, json: bool, t0_ns: u64) {
    if json {
        println!("{}", e.to_json());
    } else {
        println!("{}", line(e, t0_ns));
    }
}

/// The totals, one line (on stderr).
pub fn summary(t: &RunTotals, running: u64) -> String {
    let by: Vec<String> = Ending::ALL
        .iter()
        .filter(|e| e.finished() && t.by_ending[e.position()] > 0)
        .map(|e| format!("{} {}", e.as_str(), thousands(t.by_ending[e.position()])))
        .collect();
    let mut s = format!("episodes: {} ended", thousands(t.finished()));
    if !by.is_empty() {
        s.push_str(&format!(" ({})", by.join(", ")));
    }
    s.push_str(&format!(
        ", {} complete, {} incomplete, {} going on",
        thousands(t.complete),
        thousands(t.incomplete),
        thousands(running)
    ));
    if let (Some(r), Some(l)) = (t.mean_return(), t.mean_length()) {
        s.push_str(&format!(
            "; mean return {r:.4} and length {l:.1} over {} exact",
            thousands(t.exact)
        ));
    }
    s.push_str(&format!(
        "; {} frames taken, {} not",
        thousands(t.frames_taken),
        thousands(t.frames_lacking)
    ));
    s
}

pub fn run_args(a: &EpisodesArgs) -> Result<(), CliError> {
    match &a.file {
        Some(path) => run_file(path, a.json),
        None => run_live(
            &a.target.require()?,
            a.target.layout,
            a,
            (a.busy_budget > 0.0).then_some(a.busy_budget),
        ),
    }
}

fn run_live(
    target: &Target,
    choice: LayoutChoice,
    a: &EpisodesArgs,
    busy_budget: Option<f32>,
) -> Result<(), CliError> {
    let stop = stop_flag();
    let attached = attach(target, choice)?;
    for w in &attached.geometry.warnings {
        eprintln!("warning: {w}");
    }
    let mut sampler = super::watch::headless_sampler(
        target,
        choice,
        busy_budget,
        None,
        Some(BookDetail::default()),
    )?;
    let Some(book) = sampler.episodes().cloned() else {
        return Err(CliError::Other(
            "the episodes' accountant did not start".into(),
        ));
    };
    eprintln!(
        "following {}: every env's episodes as they end (Ctrl-C to stop)",
        attached.label()
    );
    let t0 = lrbc::clock::monotonic_now_ns();
    let (mut seen, mut printed) = (0u64, 0u64);
    let take = |book: &EpisodeBook, seen: &mut u64, printed: &mut u64| {
        let (new, missed) = book.ended_since(*seen);
        if missed > 0 {
            eprintln!("warning: {missed} episodes ended faster than they were printed");
        }
        for e in &new {
            if a.count.is_some_and(|c| *printed >= c) {
                break;
            }
            print(e, a.json, t0);
            *printed += 1;
        }
        *seen = book.totals.finished();
    };
    look_until_done(&sampler, &stop, a.secs, "the follower's", |_| {
        take(&lock(&book), &mut seen, &mut printed);
        a.count.is_some_and(|c| printed >= c)
    })?;
    // What ended and what goes on, as of one moment of the book.
    let b = lock(&book);
    let running: Vec<Episode> = b.running.iter().flatten().copied().collect();
    if a.count.is_none_or(|c| printed < c) {
        take(&b, &mut seen, &mut printed);
        for e in &running {
            print(e, a.json, t0);
        }
    }
    eprintln!("{}", summary(&b.totals, running.len() as u64));
    drop(b);
    sampler.stop();
    Ok(())
}

fn run_file(path: &Path, json: bool) -> Result<(), CliError> {
    let mut rec = lrbc_recording::replay::Recording::open(path)?;
    if let Some(note) = rec.unfinished_note() {
        eprintln!("warning: {} {note}", path.display());
    }
    let t0 = rec.time_range().map_or(0, |r| r.0);
    let mut acc = lrbc_recording::replay::RecordedEpisodes::new(&rec.geometry);
    let mut book = EpisodeBook::new(rec.geometry.num_envs, 1);
    let mut out = Vec::new();
    let mut last_ns = 0;
    rec.frames_between(0, u64::MAX, |f| {
        acc.frame(&f, &mut out);
        for e in out.drain(..) {
            print(&e, json, t0);
            book.apply(&e);
        }
        last_ns = f.sampled_ns;
        true
    })
    .map_err(|e| CliError::Other(format!("{}: {e}", path.display())))?;
    if let Some(a) = acc.accountant() {
        book.progress(a, last_ns);
    }
    acc.finish(&mut out);
    let running = out.len() as u64;
    for e in out.drain(..) {
        print(&e, json, t0);
    }
    eprintln!("{}", summary(&book.totals, running));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_episode_line_says_its_frames_and_return() {
        let mut e = Episode {
            env: 6,
            first_frame: 1,
            last_frame: 11,
            first_ns: 1_000_000_000,
            last_ns: 1_018_000_000,
            ret: 7.5,
            min_reward: 0.5,
            max_reward: 1.0,
            ending: Ending::Done,
            lacking: 0,
            began_before: false,
            nonfinite_frame: None,
        };
        assert_eq!(
            line(&e, 1_000_000_000),
            "     0.018 s  env 6     frames 1–11 (11 frames)  return 7.5  done"
        );
        e.first_frame = 11;
        e.lacking = 1;
        assert_eq!(
            line(&e, 1_000_000_000),
            "     0.018 s  env 6     frames 11–11 (1 frame)  return ~7.5  done (incomplete: 1 frame not taken)"
        );
    }
}
