//! The `false` measure: the events `events` prints over a clean run (no plants).

use super::DetectBenchArgs;
use super::events::EventsProcess;
use crate::fixtures::start;
use crate::rounds::ATTACH;
use crate::shared::BenchError;
use lrbc_sim::children::ChildProcess;
use lrbc_sim::engine::Preset;

pub(super) fn clean_table(args: &DetectBenchArgs) -> Result<(), BenchError> {
    println!(
        "clean run: train4096, client at {} Hz, no plants; `events --json` for {} s from 0.5 s \
         after the client's start (it ends before the client)",
        args.run.hz, args.clean_secs
    );
    let mut run = start(
        Preset::Train4096,
        (Some(args.run.hz), "random"),
        None,
        "detect-clean",
    )?;
    std::thread::sleep(ATTACH);
    let o = EventsProcess::start(&run.name, Some(args.clean_secs))?.finish()?;
    if let Some(code) = run.client.as_mut().and_then(ChildProcess::exited) {
        return Err(BenchError::Other(format!(
            "the client exited ({code}) during the clean run"
        )));
    }
    drop(run);
    println!(
        "  {:>8} {:>10} {:>10} {:>9} {:>14} {:>7}",
        "secs", "seen", "checked", "share", "rewards/flags", "events"
    );
    println!(
        "  {:>8.0} {:>10} {:>10} {:>7.2} % {:>14} {:>7}",
        args.clean_secs,
        o.seen,
        o.checked,
        100.0 * o.checked as f64 / o.seen.max(1) as f64,
        o.flags_checked,
        o.events.len()
    );
    for e in &o.events {
        println!(
            "    event: {} at frame {}: {}",
            e["kind"].as_str().unwrap_or_default(),
            e["first_frame"],
            e["message"].as_str().unwrap_or_default()
        );
    }
    Ok(())
}
