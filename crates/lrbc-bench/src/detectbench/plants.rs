//! The `rate` measure: one-frame NaNs planted at random by the simulated engine, and
//! how many `events` finds at their frame, env, channel and index, on a quiet machine or
//! with both cores loaded.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::DetectBenchArgs;
use super::events::{EventsOutcome, EventsProcess};
use crate::rounds::ATTACH;
use crate::shared::BenchError;
use lrbc::attach::{Target, attach};
use lrbc::layout::LayoutChoice;
use lrbc_sim::children::{ChildProcess, start_client, start_engine};
use lrbc_sim::engine::Preset;

/// NaNs planted in one engine run.
const NANS_PER_RUN: usize = 10;
/// The first NaN of a run is planted at this frame or later (the detector is attached
/// before the client's first step).
const FIRST_PLANT: u64 = 1000;
/// `events` is stopped once the run is this many frames past its last NaN (the client
/// goes on for longer, so that its end is no stall in the detector's view).
const AFTER_LAST: u64 = 300;
/// Frames the client steps past the last NaN.
const CLIENT_AFTER_LAST: u64 = 1000;
/// A small generator (splitmix64): the same plants for the same seed.
#[derive(Debug)]
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// In `0..n`.
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// The channel of a planted value, as `--plant` and `events --json` name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Channel {
    Observation,
    Action,
    Reward,
}

impl Channel {
    fn plant_name(self) -> &'static str {
        match self {
            Channel::Observation => "obs",
            Channel::Action => "act",
            Channel::Reward => "reward",
        }
    }

    fn event_name(self) -> &'static str {
        match self {
            Channel::Observation => "observation",
            Channel::Action => "action",
            Channel::Reward => "reward",
        }
    }
}

/// One planted one-frame NaN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Nan {
    frame_seq: u64,
    env: u32,
    channel: Channel,
    /// None for a reward.
    index: Option<u32>,
}

impl Nan {
    /// As `sim engine --plant` takes it.
    fn spec(&self) -> String {
        let mut s = format!(
            "nan@{}:env={},channel={}",
            self.frame_seq,
            self.env,
            self.channel.plant_name()
        );
        if let Some(i) = self.index {
            s.push_str(&format!(",index={i}"));
        }
        s
    }

    /// Whether `event` (an object of `events --json`) is this NaN.
    fn found_by(&self, event: &serde_json::Value) -> bool {
        event["kind"] == "nonfinite"
            && event["first_frame"].as_u64() == Some(self.frame_seq)
            && event["env"].as_u64() == Some(u64::from(self.env))
            && event["channel"] == self.channel.event_name()
            && event["index"].as_u64() == self.index.map(u64::from)
    }
}

/// `count` NaNs in runs of [`NANS_PER_RUN`], each at a random env, channel, index and
/// frame, 300 to 700 frames apart.
fn plan(seed: u64, count: usize, (envs, obs, act): (u32, u32, u32)) -> Vec<Vec<Nan>> {
    let mut rng = SplitMix(seed);
    let mut runs = Vec::new();
    let mut left = count;
    while left > 0 {
        let n = left.min(NANS_PER_RUN);
        left -= n;
        let mut frame_seq = FIRST_PLANT + rng.below(500);
        let mut run = Vec::with_capacity(n);
        for _ in 0..n {
            let env = rng.below(u64::from(envs)) as u32;
            let (channel, index) = match rng.below(3) {
                0 => (Channel::Observation, Some(rng.below(u64::from(obs)) as u32)),
                1 => (Channel::Action, Some(rng.below(u64::from(act)) as u32)),
                _ => (Channel::Reward, None),
            };
            run.push(Nan {
                frame_seq,
                env,
                channel,
                index,
            });
            frame_seq += 300 + rng.below(401);
        }
        runs.push(run);
    }
    runs
}

/// One engine run with `nans` planted, `events` attached before the client's first
/// step and stopped once the run is past the last NaN.
fn planted_run(name: &str, nans: &[Nan], hz: f64) -> Result<EventsOutcome, BenchError> {
    let last = nans
        .iter()
        .map(|n| n.frame_seq)
        .max()
        .unwrap_or(FIRST_PLANT);
    let specs: Vec<String> = nans.iter().map(Nan::spec).collect();
    let mut engine_args = vec!["--force"];
    for s in &specs {
        engine_args.extend(["--plant", s.as_str()]);
    }
    let engine = start_engine(name, Preset::Train4096, &engine_args)?;
    let events = EventsProcess::start(name, None)?;
    std::thread::sleep(ATTACH);
    let steps = last + CLIENT_AFTER_LAST;
    let mut client = start_client(
        name,
        &[
            "--hz".into(),
            hz.to_string(),
            "--steps".into(),
            steps.to_string(),
        ],
        Stdio::null(),
    )?;
    let a = attach(&Target::Shm(name.to_string()), LayoutChoice::Auto)?;
    let deadline = Instant::now() + Duration::from_secs_f64(4.0 * steps as f64 / hz + 30.0);
    loop {
        let frame_seq = a
            .segment
            .load_u64(a.geometry.counters.frame_seq)
            .unwrap_or(0);
        if frame_seq >= last + AFTER_LAST {
            break;
        }
        if let Some(code) = client.exited() {
            return Err(BenchError::Other(format!(
                "the client exited ({code}) at frame {frame_seq}, before the last NaN"
            )));
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Other(format!(
                "the run reached frame {frame_seq} of {} in time",
                last + AFTER_LAST
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    events.interrupt();
    let outcome = events.finish();
    drop(a);
    drop(client);
    drop(engine);
    outcome
}

/// Two processes that spin, loading both cores as a trainer's do.
fn load_both_cores() -> Result<Vec<ChildProcess>, BenchError> {
    (0..2)
        .map(|_| {
            ChildProcess::spawn_program(
                Path::new("sh"),
                "busy loop",
                &["-c".into(), "while :; do :; done".into()],
                Stdio::null(),
            )
            .map_err(BenchError::from)
        })
        .collect()
}

fn rate_row(args: &DetectBenchArgs, busy: bool) -> Result<(), BenchError> {
    let (envs, obs, act, _) = Preset::Train4096.sizes();
    let runs = plan(args.seed, args.nans as usize, (envs, obs, act));
    let _load = if busy { load_both_cores()? } else { Vec::new() };
    let (mut found, mut planted) = (0usize, 0usize);
    let (mut seen, mut checked, mut flags) = (0u64, 0u64, 0u64);
    let (mut elsewhere, mut others) = (Vec::new(), Vec::new());
    let mut missed = Vec::new();
    let mut per_run = Vec::new();
    // Found and planted, by channel.
    let channels = [Channel::Observation, Channel::Action, Channel::Reward];
    let mut by_channel = [(0usize, 0usize); 3];
    for (r, nans) in runs.iter().enumerate() {
        let name = format!("lrbc-detectbench-{}-plants{r}", std::process::id());
        let o = planted_run(&name, nans, args.run.hz)?;
        let hits = nans
            .iter()
            .filter(|n| {
                let hit = o.events.iter().any(|e| n.found_by(e));
                if let Some(k) = channels.iter().position(|c| *c == n.channel) {
                    by_channel[k].0 += usize::from(hit);
                    by_channel[k].1 += 1;
                }
                if !hit {
                    missed.push(**n);
                }
                hit
            })
            .count();
        for e in &o.events {
            if nans.iter().any(|n| n.found_by(e)) {
                continue;
            }
            if e["kind"] == "nonfinite" {
                elsewhere.push(e.clone());
            } else {
                others.push(e.clone());
            }
        }
        per_run.push(format!("{hits}/{}", nans.len()));
        found += hits;
        planted += nans.len();
        seen += o.seen;
        checked += o.checked;
        flags += o.flags_checked;
    }
    let by_channel: Vec<String> = channels
        .iter()
        .zip(by_channel)
        .map(|(c, (f, p))| format!("{} {f}/{p}", c.event_name()))
        .collect();
    println!(
        "  {:<6} {planted:>8} {found:>6} {:>7.1} % {:>9} {:>9} {:>8.2} % {:>14} {:>10} {:>7}   {}; per run: {}",
        if busy { "busy" } else { "quiet" },
        100.0 * found as f64 / planted.max(1) as f64,
        seen,
        checked,
        100.0 * checked as f64 / seen.max(1) as f64,
        flags,
        elsewhere.len(),
        others.len(),
        by_channel.join(", "),
        per_run.join(", ")
    );
    for n in &missed {
        println!(
            "    not found: frame {} env {} {}{}",
            n.frame_seq,
            n.env,
            n.channel.event_name(),
            n.index.map_or_else(String::new, |i| format!(" [{i}]"))
        );
    }
    for e in elsewhere.iter().chain(&others) {
        println!(
            "    other event: frame {} {}",
            e["first_frame"],
            e["message"].as_str().unwrap_or_default()
        );
    }
    Ok(())
}

pub(super) fn rate_table(args: &DetectBenchArgs) -> Result<(), BenchError> {
    println!(
        "planted one-frame NaNs (seed {}, random env, channel and index, {NANS_PER_RUN} to an \
         engine run, 300 to 700 frames apart), train4096, client at {} Hz, `events --json` \
         attached before the first step; found = an event at the NaN's frame_seq, env, \
         channel and index{}",
        args.seed,
        args.run.hz,
        if args.busy {
            "; busy: two busy-loop processes load both cores"
        } else {
            ""
        }
    );
    println!(
        "  {:<6} {:>8} {:>6} {:>9} {:>9} {:>9} {:>10} {:>14} {:>10} {:>7}",
        "load",
        "planted",
        "found",
        "share",
        "seen",
        "checked",
        "share",
        "rewards/flags",
        "elsewhere",
        "other"
    );
    rate_row(args, false)?;
    if args.busy {
        rate_row(args, true)?;
    }
    println!(
        "  (elsewhere: a NaN or infinity event at no planted place; other: events of other kinds)"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_plants_the_same_nans_within_the_sizes() {
        let sizes = (4096, 100, 12);
        let runs = plan(7, 25, sizes);
        assert_eq!(runs, plan(7, 25, sizes));
        assert_ne!(runs, plan(8, 25, sizes));
        assert_eq!(runs.iter().map(Vec::len).collect::<Vec<_>>(), [10, 10, 5]);
        for run in &runs {
            assert!(run[0].frame_seq >= FIRST_PLANT);
            for pair in run.windows(2) {
                let gap = pair[1].frame_seq - pair[0].frame_seq;
                assert!((300..=700).contains(&gap), "{gap}");
            }
            for n in run {
                assert!(n.env < 4096);
                match n.channel {
                    Channel::Observation => assert!(n.index.is_some_and(|i| i < 100)),
                    Channel::Action => assert!(n.index.is_some_and(|i| i < 12)),
                    Channel::Reward => assert_eq!(n.index, None),
                }
            }
        }
    }

    #[test]
    fn a_nan_is_found_by_an_event_at_its_frame_env_channel_and_index_alone() {
        let nan = Nan {
            frame_seq: 3000,
            env: 17,
            channel: Channel::Observation,
            index: Some(42),
        };
        assert_eq!(nan.spec(), "nan@3000:env=17,channel=obs,index=42");
        let event = serde_json::json!({"kind": "nonfinite", "first_frame": 3000, "env": 17,
            "channel": "observation", "index": 42, "value": "NaN"});
        assert!(nan.found_by(&event));
        for (key, other) in [
            ("first_frame", serde_json::json!(3001)),
            ("env", serde_json::json!(18)),
            ("channel", serde_json::json!("action")),
            ("index", serde_json::json!(41)),
            ("kind", serde_json::json!("out_of_range")),
        ] {
            let mut e = event.clone();
            e[key] = other;
            assert!(!nan.found_by(&e), "{key}");
        }
        let reward = Nan {
            channel: Channel::Reward,
            index: None,
            ..nan
        };
        assert_eq!(reward.spec(), "nan@3000:env=17,channel=reward");
        let event = serde_json::json!({"kind": "nonfinite", "first_frame": 3000, "env": 17,
            "channel": "reward", "value": "NaN"});
        assert!(reward.found_by(&event));
    }
}
