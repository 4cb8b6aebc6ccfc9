//! `lrbc-bench open`: the time from `open` to the first frame drawn, and the time a scrub
//! takes, on a large recording of train4096 (figures in docs/benchmarks.md).

use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;

use crate::shared::BenchError;
use crate::uibench::headless_pass;
use lrbc::attach::{Target, attach};
use lrbc::layout::LayoutChoice;
use lrbc_inspector::ui::InspectorApp;
use lrbc_inspector::ui::settings::{Settings, grid_tree};
use lrbc_recording::format::Compression;
use lrbc_recording::recorder::Recorder;
use lrbc_recording::replay::Recording;
use lrbc_sim::engine::Preset;
use lrbc_sim::inprocess::SimRun;

#[derive(Debug, Clone, Args)]
pub struct OpenBenchArgs {
    /// Size of the recording in MiB (made once in the temp folder, then reused).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(16..))]
    pub size_mib: u64,
    /// Seeks to random times.
    #[arg(long, default_value_t = 200)]
    pub seeks: usize,
}

/// The envs `record --envs 0-7` records.
const RECORDED: u32 = 8;
/// How long a step may take before the benchmark gives up.
const WAIT: Duration = Duration::from_secs(120);

fn fail(e: impl std::fmt::Display) -> BenchError {
    BenchError::Other(e.to_string())
}

fn file_for(mib: u64) -> PathBuf {
    std::env::temp_dir().join(format!(
        "lrbc-bench-open-train4096-{RECORDED}envs-{mib}mib.mcap"
    ))
}

/// A finished recording of train4096's envs 0 to 7 of at least `bytes`.
fn fits(path: &Path, bytes: u64) -> bool {
    let Ok(len) = std::fs::metadata(path).map(|m| m.len()) else {
        return false;
    };
    let Ok(rec) = Recording::open(path) else {
        return false;
    };
    let g = &rec.geometry;
    let recorded = (0..RECORDED)
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(",");
    len >= bytes
        && rec.unfinished_at.is_none()
        && (g.num_envs, g.obs_size, g.act_size) == (4096, 100, 12)
        && rec
            .metadata
            .get("lrbc.geometry")
            .and_then(|m| m.get("recorded_envs"))
            == Some(&recorded)
}

/// Records an in-process train4096 engine and client (unpaced, with command traffic)
/// as `record --envs 0-7` does, until the file holds `bytes`.
fn make(path: &Path, bytes: u64) -> Result<(), BenchError> {
    let part = path.with_extension("mcap.part");
    let sim = SimRun::start(Preset::Train4096, None)?;
    let a = attach(&Target::Shm(sim.name.clone()), LayoutChoice::Auto)?;
    let file =
        std::fs::File::create(&part).map_err(|e| fail(format!("{}: {e}", part.display())))?;
    let writing = |e: lrbc_recording::recorder::RecordError| {
        fail(format!("writing {}: {}", part.display(), e.cause()))
    };
    let capture =
        lrbc_recording::recorder::Capture::new(a, (0..RECORDED).collect()).map_err(writing)?;
    let mut rec = Recorder::with_compression(capture, BufWriter::new(file), Compression::None)
        .map_err(writing)?;
    let started = Instant::now();
    let mut next_chunk = started + Duration::from_secs(1);
    let mut next_line = started + Duration::from_secs(5);
    while rec.bytes_written() < bytes {
        if !rec.poll().map_err(writing)? {
            std::thread::sleep(Duration::from_micros(200));
        }
        // A chunk ends each second, as `record` ends them.
        if Instant::now() >= next_chunk {
            next_chunk += Duration::from_secs(1);
            rec.end_chunk().map_err(writing)?;
        }
        if Instant::now() >= next_line {
            next_line += Duration::from_secs(5);
            eprintln!(
                "lrbc-bench open: recording {} MiB of {} MiB",
                rec.bytes_written() >> 20,
                bytes >> 20
            );
        }
        if started.elapsed() > Duration::from_secs(1800) {
            return Err(fail("the recording took over 30 minutes"));
        }
    }
    rec.finish().map_err(writing)?;
    drop(sim);
    std::fs::rename(&part, path).map_err(|e| fail(format!("{}: {e}", path.display())))?;
    Ok(())
}

/// The zstd copy of the raw recording `raw`: the same schemas, channels, messages (in
/// file order) and metadata, in chunks of the writer's default size, as another MCAP
/// writer compresses.
fn compressed_copy(raw: &Path, out: &Path) -> Result<(), BenchError> {
    // Read whole (a gigabyte): the mcap crate's message stream reads from memory.
    let bytes = std::fs::read(raw).map_err(fail)?;
    let metadata = Recording::open(raw).map_err(fail)?.metadata;
    let part = out.with_extension("mcap.part");
    let options = mcap::WriteOptions::new().profile(lrbc_recording::format::PROFILE);
    let mut w = lrbc_recording::format::write_options(options, Compression::default())
        .map_err(fail)?
        .create(BufWriter::new(std::fs::File::create(&part).map_err(fail)?))
        .map_err(fail)?;
    let mut channels = std::collections::HashMap::new();
    for m in mcap::MessageStream::new(&bytes).map_err(fail)? {
        let m = m.map_err(fail)?;
        let id = match channels.get(&m.channel.id) {
            Some(&id) => id,
            None => {
                let schema = match &m.channel.schema {
                    Some(s) => w.add_schema(&s.name, &s.encoding, &s.data).map_err(fail)?,
                    None => 0,
                };
                let id = w
                    .add_channel(
                        schema,
                        &m.channel.topic,
                        &m.channel.message_encoding,
                        &m.channel.metadata,
                    )
                    .map_err(fail)?;
                channels.insert(m.channel.id, id);
                id
            }
        };
        let header = mcap::records::MessageHeader {
            channel_id: id,
            sequence: m.sequence,
            log_time: m.log_time,
            publish_time: m.publish_time,
        };
        w.write_to_known_channel(&header, &m.data).map_err(fail)?;
    }
    for (name, metadata) in metadata {
        w.write_metadata(&mcap::records::Metadata { name, metadata })
            .map_err(fail)?;
    }
    w.finish().map_err(fail)?;
    drop(w);
    std::fs::rename(&part, out).map_err(fail)
}

/// Drops the page cache (root on Linux); false when it cannot.
fn drop_caches() -> bool {
    cfg!(target_os = "linux") && std::fs::write("/proc/sys/vm/drop_caches", "1").is_ok()
}

/// The window with default settings and the benchmarks' panel grid, attached to nothing.
fn app(ctx: &egui::Context) -> InspectorApp {
    InspectorApp::new(
        ctx,
        Settings::default(),
        Some(grid_tree()),
        None,
        LayoutChoice::Auto,
    )
}

/// `open` in an app that is already up: (ms to the end of the first pass that draws a
/// frame of the recording, its frame_seq).
fn first_frame(path: &Path) -> Result<(f64, u64), BenchError> {
    let ctx = egui::Context::default();
    let mut app = app(&ctx);
    let size = egui::vec2(1600.0, 1000.0);
    // The window's own start (fonts) is not part of opening the file.
    for _ in 0..3 {
        headless_pass(&ctx, size, &mut app);
    }
    let t0 = Instant::now();
    app.open_recording(path);
    loop {
        let shown = app
            .session
            .as_ref()
            .ok_or_else(|| fail(format!("{}: the window did not open it", path.display())))?
            .sampler
            .lock()
            .latest
            .as_ref()
            .map(|(seq, _)| *seq);
        headless_pass(&ctx, size, &mut app);
        if let Some(seq) = shown {
            return Ok((t0.elapsed().as_secs_f64() * 1e3, seq));
        }
        if t0.elapsed() > WAIT {
            return Err(fail("no frame drawn within 2 minutes"));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
}

/// Milliseconds until the frame at each target time was published, and until the
/// history behind it was filled.
struct Scrub {
    frame_ms: Vec<f64>,
    history_ms: Vec<f64>,
}

/// `seeks` seeks to random times across the recording, caches dropped before each when
/// `cold`.
fn scrub(path: &Path, seeks: usize, cold: bool) -> Result<Scrub, BenchError> {
    let ctx = egui::Context::default();
    let mut app = app(&ctx);
    app.open_recording(path);
    let session = app
        .session
        .as_ref()
        .ok_or_else(|| fail(format!("{}: the window did not open it", path.display())))?;
    let (_, player) = session
        .recording()
        .ok_or_else(|| fail("not a recording session"))?;
    let settled = |t: Option<u64>| -> Result<(), BenchError> {
        let start = Instant::now();
        loop {
            let s = player.state();
            if s.seek_to.is_none() && t.is_none_or(|t| s.cursor_ns == t) && s.frame_seq.is_some() {
                return Ok(());
            }
            if start.elapsed() > WAIT {
                return Err(fail("the player did not settle within 2 minutes"));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    };
    settled(None)?;
    let (t0, t1) = player.state().range;
    let mut rng = XorShift(0x5eed);
    let mut out = Scrub {
        frame_ms: Vec::with_capacity(seeks),
        history_ms: Vec::with_capacity(seeks),
    };
    for _ in 0..seeks {
        let t = t0 + rng.next() % (t1 - t0).max(1);
        let generation = player.data.lock().map_or(0, |d| d.generation);
        if cold {
            drop_caches();
        }
        let start = Instant::now();
        player.request(|s| s.seek_to = Some(t));
        loop {
            let published = player.data.lock().is_ok_and(|d| {
                d.generation != generation && d.latest.is_some() && d.counters.read_ns <= t
            });
            if published {
                break;
            }
            if start.elapsed() > WAIT {
                return Err(fail("no frame published within 2 minutes"));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        out.frame_ms.push(start.elapsed().as_secs_f64() * 1e3);
        settled(Some(t))?;
        out.history_ms.push(start.elapsed().as_secs_f64() * 1e3);
    }
    Ok(out)
}

/// A small xorshift generator: the same times on every run.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn summary(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(f64::total_cmp);
    (
        lrbc_live::stats::quantile(v, 0.5).unwrap_or(0.0),
        lrbc_live::stats::quantile(v, 0.99).unwrap_or(0.0),
        v.last().copied().unwrap_or(0.0),
    )
}

pub fn run(args: &OpenBenchArgs) -> Result<(), BenchError> {
    let bytes = args.size_mib << 20;
    let raw = file_for(args.size_mib);
    if fits(&raw, bytes) {
        println!("lrbc-bench open: reusing {}", raw.display());
    } else {
        println!("lrbc-bench open: making {}", raw.display());
        make(&raw, bytes)?;
    }
    let zstd = raw.with_extension("zstd.mcap");
    let copied = Recording::open(&zstd).is_ok_and(|r| {
        r.unfinished_at.is_none()
            && r.packings()
                .keys()
                .eq([&lrbc_recording::replay::Packing::Zstd])
    });
    if !copied || !fits(&zstd, 0) {
        println!("lrbc-bench open: compressing a copy, {}", zstd.display());
        compressed_copy(&raw, &zstd)?;
    }
    for path in [raw, zstd] {
        measure(&path, args)?;
    }
    Ok(())
}

/// The figures of one file.
fn measure(path: &Path, args: &OpenBenchArgs) -> Result<(), BenchError> {
    let path = path.to_path_buf();
    let len = std::fs::metadata(&path).map_err(fail)?.len();
    let rec = Recording::open(&path).map_err(fail)?;
    let (t0, t1) = rec.time_range().unwrap_or((0, 0));
    let packings: Vec<String> = (rec.packings().iter())
        .map(|(p, (_, records, stored))| {
            format!(
                "{}, ratio {:.2}",
                p.name(),
                *records as f64 / (*stored).max(1) as f64
            )
        })
        .collect();
    println!(
        "{}: {:.1} MiB, {} chunks ({}), {} frames over {:.1} s; train4096 (4096 envs × obs 100 × act 12), envs 0-7 recorded",
        path.display(),
        len as f64 / f64::from(1 << 20),
        rec.chunks.len(),
        packings.join("; "),
        rec.frame_count.unwrap_or(0),
        t1.saturating_sub(t0) as f64 / 1e9
    );
    drop(rec);
    let can_drop = drop_caches();
    let mut rows: Vec<(String, f64, f64, f64)> = Vec::new();
    let mut first = Vec::new();
    for _ in 0..5 {
        first.push(first_frame(&path)?.0);
    }
    let (p50, _, max) = summary(&mut first);
    rows.push((
        "first frame drawn, warm cache (5 opens)".into(),
        p50,
        f64::NAN,
        max,
    ));
    if can_drop {
        let mut cold = Vec::new();
        for _ in 0..5 {
            drop_caches();
            cold.push(first_frame(&path)?.0);
        }
        let (p50, _, max) = summary(&mut cold);
        rows.push((
            "first frame drawn, page cache dropped (5 opens)".into(),
            p50,
            f64::NAN,
            max,
        ));
    }
    let mut warm = scrub(&path, args.seeks, false)?;
    let n = args.seeks;
    let (a, b, c) = summary(&mut warm.frame_ms);
    rows.push((
        format!("scrub: frame at the cursor, warm ({n} seeks)"),
        a,
        b,
        c,
    ));
    let (a, b, c) = summary(&mut warm.history_ms);
    rows.push((format!("scrub: history filled, warm ({n} seeks)"), a, b, c));
    if can_drop {
        let n = (args.seeks / 10).max(5);
        let mut cold = scrub(&path, n, true)?;
        let (a, b, c) = summary(&mut cold.frame_ms);
        rows.push((
            format!("scrub: frame at the cursor, cold ({n} seeks)"),
            a,
            b,
            c,
        ));
        let (a, b, c) = summary(&mut cold.history_ms);
        rows.push((format!("scrub: history filled, cold ({n} seeks)"), a, b, c));
    } else {
        println!("(the page cache cannot be dropped here: every figure is with a warm cache)");
    }
    println!("{:<52} {:>10} {:>10} {:>10}", "ms", "median", "p99", "max");
    for (what, a, b, c) in rows {
        let b = if b.is_nan() {
            "-".to_string()
        } else {
            format!("{b:.1}")
        };
        println!("{what:<52} {a:>10.1} {b:>10} {c:>10.1}");
    }
    Ok(())
}
