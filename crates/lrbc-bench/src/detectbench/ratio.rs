//! The `ratio` measure: the engine's lock-step rate with `events` switched on and off,
//! at the client's pace and unpaced.

use std::time::Duration;

use super::DetectBenchArgs;
use crate::observers::{Observer, observer_cost, print_cost};
use crate::shared::BenchError;

pub(super) fn ratio_table(args: &DetectBenchArgs) -> Result<(), BenchError> {
    let window = args.window.clamp(0.05, 10.0);
    // Paced, a window holds `hz × window` frames: one frame more or less is 1 % of a
    // hundred, so the paced windows are at least half a second.
    for (hz, window, what) in [
        (
            Some(args.run.hz),
            window.max(0.5),
            format!("at {} Hz (goal: at least 0.99)", args.run.hz),
        ),
        (
            None,
            window,
            "unpaced (engine and client spin: both cores busy)".to_string(),
        ),
    ] {
        println!(
            "engine's lock-step rate, train4096, {what}; `events` switched off and on in \
             windows of {window} s, blocks of off-on-on-off, {:.0} s of one run:",
            args.run.rate_secs
        );
        let c = observer_cost(
            Observer::Events,
            hz,
            args.run.rate_secs.max(2.0),
            Duration::from_secs_f64(window),
            "detect-ratio",
        )?;
        print_cost(Observer::Events, &c);
        println!(
            "  (engine and client, share of a core: with {:.1} % and {:.1} %, without {:.1} % and {:.1} %)",
            100.0 * c.pair_on.0,
            100.0 * c.pair_on.1,
            100.0 * c.pair_off.0,
            100.0 * c.pair_off.1
        );
    }
    Ok(())
}
