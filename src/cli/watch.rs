//! `watch`: one line per interval until Ctrl-C or `--count`.

use super::{CliError, sleep_unless_stopped, stop_flag};
use crate::attach::{Target, attach};
use crate::clock::MonotonicClock;
use crate::layout::LayoutChoice;
use crate::watch::{Report, Watcher};

fn hz(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

fn line(r: &Report) -> String {
    let mut s = format!(
        "[{:>8.1}s] {:<11} frame_seq={} action_seq={} frame_hz={} action_hz={} lag={}",
        r.t_secs,
        r.state.as_str(),
        r.frame_seq,
        r.action_seq,
        hz(r.frame_hz),
        hz(r.action_hz),
        r.lag
    );
    if let Some(note) = &r.note {
        s.push_str(" (");
        s.push_str(note);
        s.push(')');
    }
    s
}

pub fn run(
    target: &Target,
    choice: LayoutChoice,
    interval_secs: f64,
    count: Option<u64>,
    as_json: bool,
) -> Result<(), CliError> {
    let stop = stop_flag();
    let attached = attach(target, choice)?;
    for w in &attached.geometry.warnings {
        eprintln!("warning: {w}");
    }
    let mut watcher = Watcher::new(attached, MonotonicClock);
    let mut printed = 0u64;
    while count.is_none_or(|c| printed < c) {
        if sleep_unless_stopped(interval_secs, &stop) {
            break;
        }
        let report = watcher.tick();
        if as_json {
            let text = serde_json::to_string(&report)
                .map_err(|e| CliError::Other(format!("cannot encode a report: {e}")))?;
            println!("{text}");
        } else {
            println!("{}", line(&report));
        }
        printed += 1;
    }
    Ok(())
}
