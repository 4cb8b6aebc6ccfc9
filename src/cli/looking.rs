//! The loop in which `events` and `episodes` follow a live run.
//!
//! A look at the sampler every [`LOOK_EVERY`] until Ctrl-C, `--secs`, enough printed, or
//! the engine gone.

use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use super::{CliError, deadline_after, sleep_unless_stopped};
use lrbc_live::sampler::Sampler;
use lrbc_live::watch::State;

/// How often a live run's new findings are read and printed.
const LOOK_EVERY: Duration = Duration::from_millis(50);
/// How long after the engine is gone the last findings are waited for.
const GONE_GRACE: Duration = Duration::from_millis(600);

/// What the sampler says at one look.
#[derive(Clone, Copy, Debug)]
pub(super) struct Look {
    /// The segment's state, once the watcher has reported it.
    pub state: Option<State>,
    /// Moves on when the segment is replaced.
    pub generation: u64,
}

/// Looks at a live run every [`LOOK_EVERY`], calling `look` (which prints what is new and
/// says whether it has printed enough), until `stop` is set (Ctrl-C), `secs` have passed,
/// `look` says enough, or [`GONE_GRACE`] after the engine is gone or its segment unlinked.
/// Err: a thread of the sampler stopped (`thread` names whose, "the detector's").
pub(super) fn look_until_done(
    sampler: &Sampler,
    stop: &AtomicBool,
    secs: Option<Duration>,
    thread: &str,
    mut look: impl FnMut(Look) -> bool,
) -> Result<(), CliError> {
    let until = secs.map(|d| deadline_after(Instant::now(), d));
    let mut gone_at: Option<Instant> = None;
    loop {
        let stopped = sleep_unless_stopped(LOOK_EVERY, stop);
        let ended = sampler.ended_threads();
        if !ended.is_empty() {
            return Err(CliError::Other(format!(
                "{thread} thread {} stopped unexpectedly",
                ended.join(", ")
            )));
        }
        let now = {
            let d = sampler.lock();
            Look {
                state: d.report.as_ref().map(|r| r.state),
                generation: d.generation,
            }
        };
        let enough = look(now);
        if matches!(now.state, Some(State::EngineGone | State::Unlinked)) {
            gone_at.get_or_insert_with(Instant::now);
        }
        let done = stopped
            || until.is_some_and(|u| Instant::now() >= u)
            || enough
            || gone_at.is_some_and(|t| t.elapsed() >= GONE_GRACE);
        if done {
            return Ok(());
        }
    }
}
