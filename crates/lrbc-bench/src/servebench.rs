//! `lrbc-bench serve`: what `serve` with a loopback client costs the engine, the share of
//! frames a client gets and how late, bytes per second with the limits, and a stalled
//! client (figures in docs/benchmarks.md); with `--link`, the same over rate-limited
//! links instead (`linkbench`).

use std::process::Stdio;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::fixtures::{CountingViewer, free_port, start};
use crate::observers::{Observer, WINDOW, observer_cost, print_cost};
use crate::shared::BenchError;
use lrbc_sim::children::ChildProcess;
use lrbc_sim::engine::Preset;

/// `serve` of segment `name` on a free port with `extra` options; its URL.
fn serve(name: &str, extra: &[&str]) -> Result<(ChildProcess, String), BenchError> {
    let port = free_port()?;
    let mut args: Vec<String> = vec![
        "serve".into(),
        "--shm".into(),
        name.into(),
        "--listen".into(),
        format!("127.0.0.1:{port}"),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    let p = ChildProcess::spawn("server", &args, Stdio::null())?;
    let url = format!("ws://127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err(BenchError::Other("serve did not listen within 10 s".into()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok((p, url))
}

fn frame_seq(name: &str) -> u64 {
    lrbc::attach::attach(
        &lrbc::attach::Target::Shm(name.to_string()),
        lrbc::layout::LayoutChoice::Auto,
    )
    .ok()
    .and_then(|a| a.segment.load_u64(a.geometry.counters.frame_seq))
    .unwrap_or(0)
}

/// Quantile `q` of latencies in nanoseconds, in milliseconds ([`lrbc_live::stats`]'s
/// nearest rank); NaN for none.
fn percentile(v: &mut [u64], q: f64) -> f64 {
    v.sort_unstable();
    lrbc_live::stats::quantile(v, q).map_or(f64::NAN, |n| n as f64 / 1e6)
}

/// Frames a viewer got of those published over `secs`, and their lateness.
fn share(name: &str, url: &str, secs: f64, label: &str) -> Result<(), BenchError> {
    let viewer = CountingViewer::start(url)?;
    std::thread::sleep(Duration::from_secs(1));
    // What came before the measured span is left out.
    let _ = viewer.take();
    let f0 = frame_seq(name);
    std::thread::sleep(Duration::from_secs_f64(secs));
    let f1 = frame_seq(name);
    let mut t = viewer.take();
    let published = f1.saturating_sub(f0);
    let p50 = percentile(&mut t.latency_ns, 0.5);
    let p99 = percentile(&mut t.latency_ns, 0.99);
    let c50 = percentile(&mut t.copy_latency_ns, 0.5);
    let c99 = percentile(&mut t.copy_latency_ns, 0.99);
    println!(
        "  {label:<54} {published:>9} {:>9} {:>8.2}% {c50:>8.2} {c99:>8.2} {p50:>8.2} {p99:>8.2} {:>8.2}",
        t.frames,
        100.0 * t.frames as f64 / published.max(1) as f64,
        t.bytes as f64 / 1e6 / secs,
    );
    Ok(())
}

pub fn run(
    secs: f64,
    rate_secs: f64,
    stall_secs: f64,
    link: Option<crate::linkbench::Links<'_>>,
) -> Result<(), BenchError> {
    if let Some(link) = link {
        return crate::linkbench::run(&link);
    }
    println!(
        "lrbc-bench serve: engine, client and `serve` in separate processes; the viewers run in this process"
    );
    println!(
        "  {:<54} {:>9} {:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8}",
        "frames delivered to a loopback viewer",
        "published",
        "received",
        "share",
        "copy p50",
        "copy p99",
        "stamp50",
        "stamp99",
        "MB/s"
    );
    println!(
        "  (latency in ms to arrival: from the follower's copy just after publication, and from the engine's stamp)"
    );
    {
        let run = start(Preset::Cams64, (Some(1000.0), "random"), None, "srv-cams")?;
        let (_s, url) = serve(&run.name, &[])?;
        share(&run.name, &url, secs, "cams64 at 1 kHz")?;
        let (_s, url) = serve(&run.name, &["--images"])?;
        share(&run.name, &url, secs, "cams64 at 1 kHz, --images")?;
        // `record` at the same pace, side by side: the share of frames it keeps.
        let (c, size) = crate::recbench::record_for(&run.name, secs, &["--images"])?;
        println!(
            "  {:<54} {:>9} {:>9} {:>8.2}% {:>8} {:>8} {:>8} {:>8} {:>8.2}",
            "(`record --images` to a file, for comparison)",
            c.frames_published(),
            c.frames_recorded,
            100.0 * c.share_recorded().unwrap_or(0.0),
            "–",
            "–",
            "–",
            "–",
            size as f64 / 1e6 / secs,
        );
        let (_s, url) = serve(
            &run.name,
            &["--images", "--max-hz", "60", "--image-hz", "10"],
        )?;
        share(
            &run.name,
            &url,
            secs,
            "cams64 at 1 kHz, --images --max-hz 60 --image-hz 10",
        )?;
    }
    {
        let run = start(
            Preset::Train4096,
            (Some(1000.0), "random"),
            None,
            "srv-train",
        )?;
        let (_s, url) = serve(&run.name, &[])?;
        share(&run.name, &url, secs, "train4096 at 1 kHz")?;
        let (_s, url) = serve(&run.name, &["--max-hz", "60"])?;
        share(&run.name, &url, secs, "train4096 at 1 kHz, --max-hz 60")?;
    }
    stalled(stall_secs)?;
    println!(
        "engine's unpaced lock-step rate, train4096, `serve` (with a viewer subscribed to \
         everything) switched off and on in windows of 0.1 s, blocks of off-on-on-off, \
         {rate_secs:.0} s of one run:"
    );
    let c = observer_cost(Observer::Serve, None, rate_secs, WINDOW, "srv-rate")?;
    print_cost(Observer::Serve, &c);
    Ok(())
}

/// A viewer stops reading for `secs`: serve's resident memory, and another viewer's share.
fn stalled(secs: f64) -> Result<(), BenchError> {
    let run = start(Preset::Cams64, (Some(1000.0), "random"), None, "srv-stall")?;
    let (s, url) = serve(&run.name, &["--images"])?;
    let stalled = CountingViewer::start(&url)?;
    let other = CountingViewer::start(&url)?;
    std::thread::sleep(Duration::from_secs(2));
    let window = Duration::from_secs_f64(secs.min(10.0));
    // What came before the measured span is left out.
    let _ = other.take();
    let f0 = frame_seq(&run.name);
    std::thread::sleep(window);
    let before = other.take().frames as f64 / frame_seq(&run.name).saturating_sub(f0).max(1) as f64;
    let rss0 = lrbc_platform::resident_kib(s.pid()).unwrap_or(0);
    // Relaxed: a flag with no data behind it.
    stalled.stalled.store(true, Ordering::Relaxed);
    let mut peak = rss0;
    let f0 = frame_seq(&run.name);
    let t0 = Instant::now();
    while t0.elapsed().as_secs_f64() < secs {
        std::thread::sleep(Duration::from_millis(500));
        peak = peak.max(lrbc_platform::resident_kib(s.pid()).unwrap_or(0));
    }
    let during = other.take().frames as f64 / frame_seq(&run.name).saturating_sub(f0).max(1) as f64;
    let rss1 = lrbc_platform::resident_kib(s.pid()).unwrap_or(0);
    println!(
        "a viewer of cams64 at 1 kHz with images stops reading for {secs:.0} s: serve's resident memory {:.1} MiB at the stall, {:.1} MiB at its end, peak {:.1} MiB (+{:.1} MiB); the other viewer's share of frames {:.2} % before, {:.2} % during",
        rss0 as f64 / 1024.0,
        rss1 as f64 / 1024.0,
        peak as f64 / 1024.0,
        peak.saturating_sub(rss0) as f64 / 1024.0,
        100.0 * before,
        100.0 * during,
    );
    drop(other);
    drop(stalled);
    Ok(())
}
