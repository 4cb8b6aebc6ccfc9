//! `sim engine`, `sim client`: the simulated engine and trainer.

use std::time::Duration;

use clap::{Args, Subcommand, ValueEnum};

use super::{CliError, stop_flag};
use lrbc::layout::plan::PlanLayout;
use lrbc_recording::replay::RecordedActions;
use lrbc_sim::client::{self, ClientConfig, Policy, Rollout};
use lrbc_sim::engine::{Engine, EngineConfig, Mode, Plant, Preset};

/// The layouts the simulated engine can produce.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum SimLayout {
    #[default]
    #[value(name = "lrbc-v1")]
    LrbcV1,
    #[value(name = "luckyrobots-ipc")]
    LuckyrobotsIpc,
}

#[derive(Debug, Subcommand)]
pub enum SimCommand {
    /// Create a segment and step simulated envs in it until Ctrl-C.
    Engine(EngineArgs),
    /// Attach as the trainer and step the engine.
    Client(ClientArgs),
}

#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Segment name in /dev/shm (default: LuckyEngine_<pid>).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Sizes from the seed's examples.
    #[arg(long, value_parser = super::values::preset(), conflicts_with_all = ["envs", "obs", "act"])]
    pub preset: Option<Preset>,
    /// Number of envs (with --obs and --act).
    #[arg(long, value_name = "N", requires_all = ["obs", "act"])]
    pub envs: Option<u32>,
    /// Observations per env.
    #[arg(long, value_name = "N", requires_all = ["envs", "act"])]
    pub obs: Option<u32>,
    /// Actions per env.
    #[arg(long, value_name = "N", requires_all = ["envs", "obs"])]
    pub act: Option<u32>,
    /// Camera image per env, WIDTHxHEIGHTxCHANNELS (e.g. 64x64x3), or "none".
    #[arg(long, value_name = "WxHxC")]
    pub image: Option<String>,
    /// Segment layout.
    #[arg(long = "layout", value_enum, default_value_t = SimLayout::LrbcV1)]
    pub sim_layout: SimLayout,
    /// Leave the extension block zero, as a seed-only engine would.
    #[arg(long)]
    pub bare: bool,
    /// training: lock-step with the client; inference: free-running at --hz.
    #[arg(long, value_parser = super::values::mode(), default_value = "training")]
    pub mode: Mode,
    /// Steps per second in inference mode.
    #[arg(
        long,
        value_name = "F",
        default_value = "60",
        allow_negative_numbers = true,
        value_parser = super::args::parse_hz
    )]
    pub hz: f64,
    /// Data capacity of each command ring, a power of two.
    #[arg(long, value_name = "BYTES", default_value_t = 524_288)]
    pub ring_size: u32,
    /// Data capacity of each control ring, a power of two (0: offer no control rings).
    #[arg(long, value_name = "BYTES", default_value_t = 65_536)]
    pub ctl_ring_size: u32,
    /// Camera images per second.
    #[arg(long, value_name = "F", default_value = "30", allow_negative_numbers = true, value_parser = super::args::parse_hz)]
    pub camera_hz: f64,
    /// Replace a segment of the same name.
    #[arg(long)]
    pub force: bool,
    /// Move the counters only, no dynamics (the transport's own cost).
    #[arg(long, hide = true)]
    pub no_dynamics: bool,
    /// Seed of the dynamics.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// At step N, write NaN into env 0's first observation and its reward (a fault to
    /// test recorders and NaN guards with).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub nan_at_step: Option<u64>,
    /// Plant a fault for diagnosis tools to find (repeatable): nan@STEP, inf@STEP,
    /// -inf@STEP, done-burst@STEP, stall@STEP or drift@STEP, with optional
    /// :key=value,… (e.g. nan@3000:env=5,channel=act,index=3).
    ///
    /// nan@STEP, inf@STEP, -inf@STEP [:env=E,channel=obs|act|reward,index=I,frames=N]:
    /// the value in env E's observation or action I, or its reward, in N frames from
    /// STEP (defaults: env 0, obs, index 0, 1 frame; no index for reward). An action is
    /// written after the engine read the trainer's, before the frame is published.
    ///
    /// done-burst@STEP [:share=S,frames=N]: the done flags of the first ceil(S × envs)
    /// envs set, in N frames from STEP (S in (0, 1], default 0.75; 1 frame).
    ///
    /// stall@STEP [:secs=S,side=engine]: the engine waits S seconds (default 2, at most
    /// 3600) before it steps and publishes frame STEP; side=trainer is refused.
    ///
    /// drift@STEP [:env=E,index=I,delta=D]: env E's observation I in the frame of STEP
    /// is the dynamics' value plus D (finite, not 0; defaults: env 0, index 0, 0.001);
    /// the dynamics go on from their own value.
    ///
    /// STEP counts the engine's steps from 1; in lock-step, step K is published as the
    /// frame_seq the trainer's action_seq asked for (K when it bumps action_seq by one
    /// per frame from 0, as sim client does); in inference mode frame_seq is K.
    #[arg(
        long = "plant",
        value_name = "SPEC",
        allow_hyphen_values = true,
        value_parser = Plant::parse
    )]
    pub plants: Vec<Plant>,
}

#[derive(Debug, Clone, Args)]
pub struct ClientArgs {
    /// Segment name in /dev/shm (default: $LUCKY_SHM_NAME).
    #[arg(long, value_name = "NAME")]
    pub shm: Option<String>,
    /// Stop after this many steps (at least 1).
    #[arg(long, value_name = "N", value_parser = super::args::parse_count)]
    pub steps: Option<u64>,
    /// Steps per second (default: as fast as the engine goes).
    #[arg(long, value_name = "F", allow_negative_numbers = true, value_parser = super::args::parse_hz)]
    pub hz: Option<f64>,
    /// How actions are chosen.
    #[arg(long, value_parser = super::values::policy(), default_value = "random")]
    pub policy: Policy,
    /// Step with the actions recorded in this file (recorded with --all-envs) instead of
    /// the policy's, frame by frame, until its last frame or --steps; reset flags as
    /// the policy sets them (each env that ended at the frame before).
    #[arg(long, value_name = "A.mcap", conflicts_with = "policy")]
    pub replay: Option<std::path::PathBuf>,
    /// Send no commands, only step.
    #[arg(long)]
    pub no_commands: bool,
    /// Step in rollouts of N frames (at least 1), pausing --update after each as an
    /// on-policy (PPO-like) trainer updating its policy does: the engine waits
    /// meanwhile (frame_seq == action_seq). No update follows the last of --steps.
    #[arg(long, value_name = "N", value_parser = parse_rollout, requires = "update")]
    pub rollout: Option<u64>,
    /// How long each update after a rollout lasts (with --rollout): seconds, or with a
    /// unit (500ms), from 0 to 3600 s.
    #[arg(
        long,
        value_name = "SECS",
        allow_negative_numbers = true,
        value_parser = parse_update,
        requires = "rollout"
    )]
    pub update: Option<Duration>,
    /// Print a JSON summary at exit (steps, latency percentiles, updates).
    #[arg(long)]
    pub json: bool,
}

impl ClientArgs {
    /// The rollouts of --rollout and --update (clap holds that they come together).
    pub fn rollout(&self) -> Option<Rollout> {
        Some(Rollout {
            frames: self.rollout?,
            update: self.update?,
        })
    }
}

/// Parses the frames of a rollout (`--rollout`): a count as
/// [`super::args::parse_count`] takes, with its own message.
pub fn parse_rollout(text: &str) -> Result<u64, String> {
    super::args::parse_count(text)
        .map_err(|_| format!("must be a whole number of frames, at least 1, not {text}"))
}

/// Parses the length of an update after a rollout (`--update`): a duration as
/// [`super::args::parse_seconds`] takes, from 0 to [`Rollout::MAX_UPDATE`].
pub fn parse_update(text: &str) -> Result<Duration, String> {
    let update = super::args::parse_seconds(text, 0.0)?;
    if update > Rollout::MAX_UPDATE {
        return Err(format!(
            "must be at most {} seconds (an hour), not {text}",
            Rollout::MAX_UPDATE.as_secs()
        ));
    }
    Ok(update)
}

/// Parses "64x64x3" (or "none").
pub fn parse_image(s: &str) -> Result<Option<(u32, u32, u32)>, CliError> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    let parts: Vec<&str> = s.split(['x', 'X']).collect();
    let bad = || {
        CliError::Usage(format!(
            "--image {s:?}: expected WIDTHxHEIGHTxCHANNELS, e.g. 64x64x3, or none"
        ))
    };
    if parts.len() != 3 {
        return Err(bad());
    }
    let n = |p: &str| p.trim().parse::<u32>().map_err(|_| bad());
    Ok(Some((n(parts[0])?, n(parts[1])?, n(parts[2])?)))
}

impl EngineArgs {
    pub fn config(&self) -> Result<EngineConfig, CliError> {
        let (num_envs, obs_size, act_size, preset_image) =
            match (self.preset, self.envs, self.obs, self.act) {
                (Some(p), ..) => p.sizes(),
                (None, Some(e), Some(o), Some(a)) => (e, o, a, None),
                _ => Preset::Cams64.sizes(),
            };
        let image = match &self.image {
            Some(s) => parse_image(s)?,
            None => preset_image,
        };
        let layout = match (self.sim_layout, self.bare) {
            (SimLayout::LuckyrobotsIpc, true) => {
                return Err(CliError::Usage(
                    "--bare applies to the lrbc-v1 layout only".into(),
                ));
            }
            (SimLayout::LuckyrobotsIpc, false) => PlanLayout::Lucky,
            (SimLayout::LrbcV1, bare) => PlanLayout::Lrbc { ext: !bare },
        };
        let image = if layout == PlanLayout::Lucky && self.image.is_none() {
            None
        } else {
            image
        };
        let cfg = EngineConfig {
            name: self
                .name
                .clone()
                .unwrap_or_else(|| format!("LuckyEngine_{}", std::process::id())),
            layout,
            num_envs,
            obs_size,
            act_size,
            image,
            mode: self.mode,
            hz: self.hz,
            ring_size: self.ring_size,
            ctl_ring_size: (self.ctl_ring_size != 0).then_some(self.ctl_ring_size),
            force: self.force,
            dynamics: !self.no_dynamics,
            camera_hz: self.camera_hz,
            seed: self.seed,
            nan_at_step: self.nan_at_step,
            plants: self.plants.clone(),
        };
        // Whether each plant fits the sizes: a usage error, as the spec's own checks.
        cfg.check_plants()
            .map_err(|e| CliError::Usage(e.to_string()))?;
        Ok(cfg)
    }
}

pub fn run(cmd: SimCommand) -> Result<(), CliError> {
    match cmd {
        SimCommand::Engine(args) => run_engine(&args),
        SimCommand::Client(args) => run_client(&args),
    }
}

fn run_engine(args: &EngineArgs) -> Result<(), CliError> {
    let stop = stop_flag();
    let cfg = args.config()?;
    let mut engine = Engine::create(cfg.clone())?;
    let image = cfg
        .image
        .map_or(String::new(), |(w, h, c)| format!(", {w}×{h}×{c} images"));
    say(&format!(
        "engine: segment {} ready ({}, {} bytes, {} envs × obs {} × act {}{image}, {:?} mode), pid {}",
        engine.name(),
        match cfg.layout {
            PlanLayout::Lucky => "luckyrobots-ipc",
            PlanLayout::Lrbc { ext: true } => "lrbc-v1-ext",
            PlanLayout::Lrbc { ext: false } => "lrbc-v1",
        },
        engine.size_bytes(),
        cfg.num_envs,
        cfg.obs_size,
        cfg.act_size,
        cfg.mode,
        std::process::id()
    ));
    say(&format!(
        "engine: attach with LUCKY_SHM_NAME={}; Ctrl-C stops and removes it",
        engine.name()
    ));
    let stats = engine.run(&stop);
    // Remove the segment before saying so: nothing after this point can stop that.
    drop(engine);
    say(&format!(
        "engine: stopped after {} steps, {} requests ({} responses dropped), {} image frames; segment removed",
        stats.steps, stats.requests, stats.responses_dropped, stats.images
    ));
    Ok(())
}

/// A status line on stderr; a closed stderr is not a reason to stop.
fn say(line: &str) {
    use std::io::Write as _;
    // A closed stderr is no reason to stop.
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// A recording's actions as the simulated client's source.
struct Replayed(RecordedActions);

/// Why a recording's actions cannot drive the segment.
#[derive(Debug, thiserror::Error)]
enum ReplayedError {
    #[error(
        "the recording has {envs} envs of {acts} actions; the segment {segment_envs} envs of {segment_acts}"
    )]
    Sizes {
        envs: usize,
        acts: usize,
        segment_envs: usize,
        segment_acts: usize,
    },
    #[error("frame_seq {frame_seq}: {recorded} actions recorded, {expected} expected")]
    Step {
        frame_seq: u64,
        recorded: usize,
        expected: usize,
    },
}

impl client::ActionSource for Replayed {
    fn fits(&self, num_envs: usize, act_size: usize) -> Result<(), client::SourceError> {
        let (envs, acts) = (self.0.num_envs, self.0.act_size);
        if (envs, acts) == (num_envs, act_size) {
            Ok(())
        } else {
            Err(ReplayedError::Sizes {
                envs,
                acts,
                segment_envs: num_envs,
                segment_acts: act_size,
            }
            .into())
        }
    }

    fn next_actions(&mut self, actions: &mut [f32]) -> Result<bool, client::SourceError> {
        match self.0.next_step()? {
            None => Ok(false),
            Some(step) if step.actions.len() == actions.len() => {
                actions.copy_from_slice(&step.actions);
                Ok(true)
            }
            Some(step) => Err(ReplayedError::Step {
                frame_seq: step.frame_seq,
                recorded: step.actions.len(),
                expected: actions.len(),
            }
            .into()),
        }
    }
}

fn run_client(args: &ClientArgs) -> Result<(), CliError> {
    let stop = stop_flag();
    let name = args
        .shm
        .clone()
        .or_else(|| {
            std::env::var("LUCKY_SHM_NAME")
                .ok()
                .filter(|n| !n.is_empty())
        })
        .ok_or_else(|| CliError::Usage("sim client needs --shm NAME (or LUCKY_SHM_NAME)".into()))?;
    let cfg = ClientConfig {
        name,
        steps: args.steps,
        hz: args.hz,
        policy: args.policy,
        commands: !args.no_commands,
        record_latency: args.json,
        step_timeout: Duration::from_secs(5),
        rollout: args.rollout(),
    };
    let mut stats = match &args.replay {
        None => client::run(&cfg, &stop),
        Some(path) => {
            let mut source = Replayed(RecordedActions::open(path).map_err(|e| {
                CliError::Other(format!("sim client --replay {}: {e}", path.display()))
            })?);
            client::run_replaying(&cfg, &stop, &mut source)
        }
    }?;
    if args.json {
        stats.latencies_ns.sort_unstable();
        let l = &stats.latencies_ns;
        println!(
            "{}",
            serde_json::json!({
                "steps": stats.steps,
                "elapsed_secs": stats.elapsed_secs,
                "steps_per_sec": stats.steps as f64 / stats.elapsed_secs.max(1e-9),
                "p50_ns": lrbc_live::stats::quantile(l, 0.5).unwrap_or(0),
                "p99_ns": lrbc_live::stats::quantile(l, 0.99).unwrap_or(0),
                "max_ns": l.last().copied().unwrap_or(0),
                "env_resets": stats.env_resets,
                "requests": stats.requests,
                "responses": stats.responses,
                "error_responses": stats.error_responses,
                "frame_mismatches": stats.frame_mismatches,
                "updates": stats.updates,
                "update_secs": stats.update_secs,
            })
        );
    } else {
        let updates = if cfg.rollout.is_some() {
            format!(", {} updates ({:.1} s)", stats.updates, stats.update_secs)
        } else {
            String::new()
        };
        eprintln!(
            "client: {} steps in {:.1} s{updates}, {} env resets, {} requests, {} responses ({} errors)",
            stats.steps,
            stats.elapsed_secs,
            stats.env_resets,
            stats.requests,
            stats.responses,
            stats.error_responses
        );
    }
    Ok(())
}
