//! `lrbc-bench compare`: `compare` of two large recordings (1 GiB each by default):
//! frames per second and peak resident memory, beside reading the same two files.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use crate::shared::{BenchError, mb};
use clap::Args;
use lrbc_recording::export::synthetic::{self, PlantedValue, Spec, SyntheticPlant};
use lrbc_recording::format::RecFrame;
use lrbc_recording::replay::{ReadError, StreamItem, read_recording};

/// `lrbc-bench compare`: the size of the recordings and how often each is measured.
#[derive(Debug, Clone, Args)]
pub struct CompareBenchArgs {
    /// Size of each synthetic recording, MiB.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub size_mib: u64,
    /// Runs of each measurement (the median is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Folder for the recordings (default: the system's temporary folder).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Only the files' comparison, or only the engine's rate with `compare --shm`.
    #[arg(long, value_enum)]
    pub only: Option<ComparePart>,
    /// Seconds of the run the rate is measured over.
    #[arg(long, default_value_t = 60.0, value_parser = crate::shared::seconds_f64)]
    pub rate_secs: f64,
}

/// A part of `lrbc-bench compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ComparePart {
    /// Two large recordings compared.
    Files,
    /// The engine's unpaced rate with `compare BASELINE --shm` attached.
    Rate,
}

/// The recordings' shape: 64 envs, 32 observations and 8 actions, every env recorded.
const ENVS: u32 = 64;
const OBS: u32 = 32;
const ACT: u32 = 8;
/// The small pair, against which the large pair's memory is set.
const SMALL_MIB: u64 = 16;

/// Removes the files it names when dropped.
struct Files(Vec<PathBuf>);

impl Drop for Files {
    fn drop(&mut self) {
        for f in &self.0 {
            // Cleanup: there may be nothing to remove.
            let _ = std::fs::remove_file(f);
        }
    }
}

/// Writes run A and run B (B with a divergence planted in four envs) of about `mib` MiB
/// each.
fn write_pair(dir: &Path, tag: &str, mib: u64) -> Result<(PathBuf, PathBuf, u64), BenchError> {
    let probe = Spec::of(ENVS, OBS, ACT, 1000);
    let (written, _) = synthetic::write(&probe, std::io::Cursor::new(Vec::new()))
        .map_err(|e| BenchError::Other(e.to_string()))?;
    let per_frame = (written.into_inner().len() as u64 / probe.frames).max(1);
    let frames = ((mib << 20) / per_frame).max(10);
    let a_spec = Spec {
        frames,
        ..probe.clone()
    };
    let plant = |env, k: u64, value| SyntheticPlant {
        frame: (frames * k / 5).max(1),
        env,
        value,
    };
    let b_spec = Spec {
        plants: vec![
            plant(
                3,
                1,
                PlantedValue::Obs {
                    index: 5,
                    delta: 1e-3,
                },
            ),
            plant(
                17,
                2,
                PlantedValue::Act {
                    index: 2,
                    delta: 0.5,
                },
            ),
            plant(40, 3, PlantedValue::Reward { delta: 1.0 }),
            plant(63, 4, PlantedValue::Done),
        ],
        ..a_spec.clone()
    };
    let pid = std::process::id();
    let mut out = Vec::new();
    for (run, spec) in [("a", &a_spec), ("b", &b_spec)] {
        let path = dir.join(format!("lrbc-bench-compare-{pid}-{tag}-{run}.mcap"));
        let file = std::fs::File::create(&path)
            .map_err(|e| BenchError::Other(format!("{}: {e}", path.display())))?;
        synthetic::write(spec, std::io::BufWriter::with_capacity(1 << 20, file))
            .map_err(|e| BenchError::Other(format!("{}: {e}", path.display())))?;
        out.push(path);
    }
    let b = out.pop().unwrap_or_default();
    let a = out.pop().unwrap_or_default();
    Ok((a, b, frames))
}

/// Both files read from end to end and each frame decoded, one file after the other:
/// what any reader of the two pays. The frames read.
fn read_both(a: &Path, b: &Path) -> Result<u64, BenchError> {
    let mut frames = 0;
    let mut f = RecFrame::default();
    for path in [a, b] {
        let file = std::fs::File::open(path)
            .map_err(|e| BenchError::Other(format!("{}: {e}", path.display())))?;
        let mut input = std::io::BufReader::new(file);
        read_recording(
            &mut input,
            |item| {
                if let StreamItem::Frame { log_ns, data } = item {
                    f.decode_into(log_ns, data)
                        .map_err(|e| ReadError::Damaged(e.to_string()))?;
                    frames += 1;
                }
                Ok::<(), ReadError>(())
            },
            |_| {},
        )
        .map_err(|e| BenchError::Other(format!("{}: {e}", path.display())))?;
    }
    Ok(frames)
}

/// `lrbc-inspector compare A B` run to its end: seconds, peak resident KiB, and the
/// envs it found diverged.
fn compare_process(a: &Path, b: &Path) -> Result<(f64, u64, u64), BenchError> {
    let exe = lrbc_sim::children::inspector_exe().map_err(|e| BenchError::Other(e.0))?;
    let mut command = Command::new(exe);
    command.arg("compare").args([a, b]).arg("--json");
    let started = Instant::now();
    let (summary, usage) = crate::pollerbench::run_to_end(command, "compare")?;
    let secs = started.elapsed().as_secs_f64();
    let diverged = summary["summary"]["envs_diverged"].as_u64().unwrap_or(0);
    Ok((secs, usage.peak_resident_kib, diverged))
}

pub fn run(args: &CompareBenchArgs) -> Result<(), BenchError> {
    if args.only != Some(ComparePart::Rate) {
        files(args)?;
    }
    if args.only != Some(ComparePart::Files) {
        rate(args.rate_secs)?;
    }
    Ok(())
}

/// The engine's unpaced rate (train4096) with `compare BASELINE --shm` switched on and off.
fn rate(secs: f64) -> Result<(), BenchError> {
    use crate::observers::{Observer, WINDOW, observer_cost, print_cost};
    println!(
        "engine's unpaced lock-step rate, train4096, `compare BASELINE --shm` (its default \
         busy-machine budget) switched off and on in windows of {} s, {secs:.0} s of one run:",
        WINDOW.as_secs_f64()
    );
    let c = observer_cost(Observer::Compare, None, secs, WINDOW, "cmp-rate")?;
    print_cost(Observer::Compare, &c);
    Ok(())
}

fn files(args: &CompareBenchArgs) -> Result<(), BenchError> {
    let dir = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    eprintln!(
        "lrbc-bench compare: writing two pairs of synthetic recordings to {}",
        dir.display()
    );
    let (a, b, frames) = write_pair(&dir, "large", args.size_mib)?;
    let (sa, sb, small_frames) = write_pair(&dir, "small", SMALL_MIB)?;
    let _files = Files(vec![a.clone(), b.clone(), sa.clone(), sb.clone()]);
    let bytes = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let (in_bytes, small_bytes) = (bytes(&a) + bytes(&b), bytes(&sa) + bytes(&sb));
    let frame_bytes = u64::from(ENVS * (OBS + ACT) * 4 + ENVS * 4 + ENVS * 3);
    println!(
        "compare of two synthetic recordings of {} frames each ({:.0} MB together; {ENVS} envs, obs {OBS}, act {ACT}, \
         every env recorded, zstd; B with 4 envs' divergences planted), {} rounds, the median",
        frames,
        mb(in_bytes),
        args.rounds
    );
    let mut read_secs = Vec::new();
    let mut read_frames = 0;
    let (mut cmp_secs, mut peaks, mut small_peaks) = (Vec::new(), Vec::new(), Vec::new());
    let mut diverged = 0;
    for _ in 0..args.rounds {
        // Interleaved, so that the machine's drift falls on both alike.
        let t = Instant::now();
        read_frames = read_both(&a, &b)?;
        read_secs.push(t.elapsed().as_secs_f64());
        let (secs, peak, d) = compare_process(&a, &b)?;
        cmp_secs.push(secs);
        peaks.push(peak as f64);
        diverged = d;
        let (_, small_peak, _) = compare_process(&sa, &sb)?;
        small_peaks.push(small_peak as f64);
    }
    let med = |v: Vec<f64>| lrbc_live::stats::median(v).unwrap_or(0.0).max(1e-9);
    let (read_s, cmp_s) = (med(read_secs), med(cmp_secs));
    let (peak, small_peak) = (med(peaks) / 1024.0, med(small_peaks) / 1024.0);
    println!(
        "| pass | frames | seconds | frames/s (of each file) | MB read/s | peak resident MiB |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    println!(
        "| both files read and decoded, one after the other (this process) | {read_frames} | {read_s:.2} | {:.0} | {:.0} | – |",
        read_frames as f64 / 2.0 / read_s,
        mb(in_bytes) / read_s
    );
    println!(
        "| `compare A B` ({diverged} envs diverged) | {} | {cmp_s:.2} | {:.0} | {:.0} | {peak:.1} |",
        frames * 2,
        frames as f64 / cmp_s,
        mb(in_bytes) / cmp_s
    );
    println!(
        "| `compare` of a pair of {small_frames} frames ({:.0} MB) | {} | – | – | – | {small_peak:.1} |",
        mb(small_bytes),
        small_frames * 2
    );
    println!(
        "compare took {:.2} × the time of reading the files; its peak resident memory grew by {:.2} MiB from the small pair \
         to the large one; two frames of every env's values are {:.3} MiB",
        cmp_s / read_s,
        peak - small_peak,
        2.0 * frame_bytes as f64 / f64::from(1u32 << 20)
    );
    Ok(())
}
