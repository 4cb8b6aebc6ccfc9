//! `lrbc-bench round-trip`: lock-step round trips between an engine and a client process, for the
//! transport alone, with dynamics, and with observers attached.

use std::io::Read as _;
use std::process::Stdio;
use std::time::Duration;

use clap::Args;
use serde_json::{Value, json};

use crate::shared::BenchError;
use lrbc_sim::children::{ChildProcess, start_client, start_engine};
use lrbc_sim::engine::Preset;

#[derive(Debug, Clone, Args)]
pub struct RoundtripArgs {
    /// Sizes from the seed's examples.
    #[arg(long, value_parser = crate::shared::preset(), default_value = "train4096")]
    pub preset: Preset,
    /// Steps per measurement.
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub steps: u64,
    /// Rounds; each measures every row once.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub rounds: usize,
    /// One JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One measured configuration.
struct Variant {
    label: &'static str,
    dynamics: bool,
    observers: bool,
}

const VARIANTS: [Variant; 3] = [
    Variant {
        label: "transport only",
        dynamics: false,
        observers: false,
    },
    Variant {
        label: "with dynamics",
        dynamics: true,
        observers: false,
    },
    Variant {
        label: "with dynamics, watch + traffic attached",
        dynamics: true,
        observers: true,
    },
];

fn measure(args: &RoundtripArgs, v: &Variant, index: usize) -> Result<Value, BenchError> {
    let name = format!("lrbc-bench-{}-{index}", std::process::id());
    let engine_args: &[&str] = if v.dynamics {
        &["--force"]
    } else {
        &["--force", "--no-dynamics"]
    };
    let mut engine = start_engine(&name, args.preset, engine_args)?;
    let mut observers = Vec::new();
    if v.observers {
        observers.push(ChildProcess::spawn(
            "watch",
            &[
                "watch".into(),
                "--shm".into(),
                name.clone(),
                "--interval".into(),
                "0.1".into(),
            ],
            Stdio::null(),
        )?);
        observers.push(ChildProcess::spawn(
            "traffic reader",
            &[
                "traffic".into(),
                "--shm".into(),
                name.clone(),
                "--follow".into(),
            ],
            Stdio::null(),
        )?);
        // Let them attach before the clock starts.
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut client = start_client(
        &name,
        &[
            "--steps".into(),
            args.steps.to_string(),
            "--no-commands".into(),
            "--json".into(),
        ],
        Stdio::piped(),
    )?;
    let mut out = String::new();
    if let Some(stdout) = client.child.stdout.as_mut() {
        // A read cut short leaves the report short, and parsing it says so.
        let _ = stdout.read_to_string(&mut out);
    }
    let code = client.stop(Duration::from_secs(60));
    for mut o in observers {
        o.stop(Duration::from_secs(5));
    }
    engine.stop(Duration::from_secs(5));
    if code != Some(0) {
        return Err(BenchError::Other(format!(
            "the bench client failed ({code:?})"
        )));
    }
    let mut result: Value = serde_json::from_str(out.trim())
        .map_err(|e| BenchError::Other(format!("bad client report: {e}: {out}")))?;
    if let Some(m) = result.as_object_mut() {
        m.insert("variant".into(), json!(v.label));
    }
    Ok(result)
}

/// The median ([`lrbc_live::stats::median`]); 0 for none.
pub(crate) fn median(v: Vec<f64>) -> f64 {
    lrbc_live::stats::median(v).unwrap_or(0.0)
}

pub fn run(args: &RoundtripArgs) -> Result<(), BenchError> {
    if args.steps == 0 || args.rounds == 0 {
        return Err(BenchError::Usage(
            "--steps and --rounds must be at least 1".into(),
        ));
    }
    let (envs, obs, act, _) = args.preset.sizes();
    if !args.json {
        println!(
            "lrbc-bench round-trip: preset {} ({envs} envs × obs {obs} × act {act}), {} lock-step steps per measurement, engine and client in separate processes",
            args.preset.as_str(),
            args.steps
        );
        println!(
            "{} rounds, the rows measured in turn within each round (the machine is shared: medians over rounds)",
            args.rounds
        );
        println!(
            "{:<42} {:>10} {:>10} {:>10} {:>10}",
            "", "steps/s", "p50 µs", "p99 µs", "max µs"
        );
    }
    // Every round measures every variant, so that noise falls on all of them alike.
    let mut all: Vec<Vec<Value>> = vec![Vec::new(); VARIANTS.len()];
    for round in 0..args.rounds {
        for (i, v) in VARIANTS.iter().enumerate() {
            all[i].push(measure(args, v, round * VARIANTS.len() + i)?);
        }
    }
    let field = |rows: &[Value], k: &str| -> Vec<f64> {
        rows.iter().map(|r| r[k].as_f64().unwrap_or(0.0)).collect()
    };
    let mut summary = Vec::new();
    for (i, v) in VARIANTS.iter().enumerate() {
        let rows = &all[i];
        let rate = median(field(rows, "steps_per_sec"));
        let p50 = median(field(rows, "p50_ns")) / 1000.0;
        let p99 = median(field(rows, "p99_ns")) / 1000.0;
        let max = field(rows, "max_ns").into_iter().fold(0.0, f64::max) / 1000.0;
        if !args.json {
            println!(
                "{:<42} {rate:>10.0} {p50:>10.1} {p99:>10.1} {max:>10.1}",
                v.label
            );
        }
        summary.push(json!({"variant": v.label, "steps_per_sec": rate, "p50_us": p50, "p99_us": p99, "max_us": max, "runs": rows}));
    }
    let rate = |i: usize| summary[i]["steps_per_sec"].as_f64().unwrap_or(0.0);
    let ratio = if rate(1) > 0.0 {
        rate(2) / rate(1)
    } else {
        0.0
    };
    if args.json {
        println!(
            "{}",
            json!({"preset": args.preset.as_str(), "steps": args.steps, "rounds": args.rounds, "rows": summary, "observer_rate_ratio": ratio})
        );
    } else {
        println!(
            "observers' cost: median steps/s with watch + traffic attached = {ratio:.3} × without"
        );
    }
    Ok(())
}
