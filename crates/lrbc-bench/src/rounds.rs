//! What the measures of `detect` and `episodes` share: the arguments of the run they
//! measure, and observers attached together to one engine and client in CPU rounds.

use std::process::Command;
use std::time::Duration;

use crate::fixtures::start;
use crate::pollerbench::run_to_end;
use crate::shared::BenchError;
use crate::shared::{parse_hz, seconds_f64};
use lrbc_platform::ProcessUsage;
use lrbc_sim::children::ChildProcess;
use lrbc_sim::engine::Preset;

/// Time for an observer to start and attach before it is counted on.
pub(crate) const ATTACH: Duration = Duration::from_millis(500);

/// The run measured: the CPU rounds, the client's pace and the engine's rate.
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Seconds of each round of the CPU measure (the three observers attached together).
    #[arg(long, default_value = "10", value_parser = seconds_f64)]
    pub secs: f64,
    /// Rounds of the CPU measure (per preset).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// The client's pace (Hz), in every run of the measures.
    #[arg(long, default_value = "1000", value_parser = parse_hz)]
    pub hz: f64,
    /// Seconds of each run in which the observer measured is switched off and on (the
    /// engine's rate).
    #[arg(long, value_name = "SECS", default_value = "90", value_parser = seconds_f64)]
    pub rate_secs: f64,
}

/// Starts an engine of `preset` and a client at `hz` (segment named after `tag`), gives
/// observers time to attach, calls `round` with the segment's name `rounds` times, and
/// fails if the client exited meanwhile.
pub(crate) fn in_rounds(
    preset: Preset,
    hz: f64,
    tag: &str,
    rounds: u32,
    mut round: impl FnMut(&str) -> Result<(), BenchError>,
) -> Result<(), BenchError> {
    let mut run = start(preset, (Some(hz), "random"), None, tag)?;
    std::thread::sleep(ATTACH);
    for _ in 0..rounds {
        round(&run.name)?;
    }
    if let Some(code) = run.client.as_mut().and_then(ChildProcess::exited) {
        return Err(BenchError::Other(format!(
            "the client exited ({code}) during the measurement"
        )));
    }
    Ok(())
}

/// What an observer run to its end printed last (a JSON line) and what it used.
pub(crate) type Ended = Result<(serde_json::Value, ProcessUsage), BenchError>;

/// Runs `commands` (a thread's name, the command, what it is) to their end together,
/// each on a thread of its own, while `alongside` runs on this one: each one's last JSON
/// line and what it used, in order, and what `alongside` gave.
pub(crate) fn run_together<const N: usize, T>(
    commands: [(&str, Result<Command, BenchError>, &str); N],
    alongside: impl FnOnce() -> T,
) -> ([Ended; N], T) {
    std::thread::scope(|s| {
        let handles = commands.map(|(thread, command, what)| {
            std::thread::Builder::new()
                .name(thread.into())
                .spawn_scoped(s, move || command.and_then(|c| run_to_end(c, what)))
                .map_err(|e| BenchError::Other(format!("cannot start a thread: {e}")))
        });
        let other = alongside();
        let results = handles.map(|h| {
            h?.join()
                .map_err(|_| BenchError::Other("an observer's thread panicked".into()))?
        });
        (results, other)
    })
}

/// An observer's CPU over the rounds (shares of one core): their mean, and each round in
/// percent.
pub(crate) fn cpu_of_rounds(cpu: &[f64]) -> (f64, String) {
    let mean = cpu.iter().sum::<f64>() / cpu.len().max(1) as f64;
    let per_round: Vec<String> = cpu.iter().map(|c| format!("{:.1}", 100.0 * c)).collect();
    (mean, per_round.join(", "))
}
