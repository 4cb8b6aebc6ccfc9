//! `serve`: the run, live, over the Foxglove WebSocket protocol, until Ctrl-C or
//! `--duration`; follows the engine across death, restart and replacement. What it says
//! each second (the progress line, the status message) is `report`'s.

mod report;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::record::EnvList;
use super::{CliError, stop_flag};
use lrbc::attach::{Attached, Target, attach};
use lrbc::clock::{Clock, MonotonicClock};
use lrbc::layout::LayoutChoice;
use lrbc_live::watch::{AttachmentWatch, Report};
use lrbc_recording::format::ImageEncoding;
use lrbc_recording::recorder::{Capture, Counts, Message};
use lrbc_remote::server::{ClientCounts, ServeCounts, Server, ServerSettings, log_line};
use report::{progress, status_json};

/// Envs served when none are chosen: the first four.
const DEFAULT_ENVS: u32 = 4;
/// How often the rings are read while no frame comes.
const RING_EVERY: Duration = Duration::from_millis(2);
/// How often the segment's state is read.
const STATE_EVERY: Duration = Duration::from_millis(250);

/// Where to listen: `HOST:PORT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listen {
    pub host: String,
    pub port: u16,
}

impl Listen {
    /// True for `localhost` and loopback addresses: only this machine can connect.
    pub fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost")
            || self
                .host
                .trim_matches(|c| c == '[' || c == ']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }
}

impl std::fmt::Display for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Parses `HOST:PORT` (`[::1]:8765` for IPv6).
pub fn parse_listen(text: &str) -> Result<Listen, String> {
    let bad = || format!("{text:?} is not HOST:PORT (e.g. 127.0.0.1:8765)");
    let (host, port) = text.trim().rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let bare = host.trim_matches(|c| c == '[' || c == ']');
    if bare.is_empty() || bare.contains(char::is_whitespace) {
        return Err(bad());
    }
    // The server binds the address as given, without brackets.
    Ok(Listen {
        host: bare.to_string(),
        port,
    })
}

/// The arguments of `serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub target: super::TargetArgs,
    /// Where to listen, HOST:PORT; another address than loopback lets anyone who
    /// reaches it watch the run.
    #[arg(long, value_name = "HOST:PORT", default_value = "127.0.0.1:8765", value_parser = parse_listen)]
    pub listen: Listen,
    /// Envs whose observations and actions are served, e.g. 0,3,8-11 (default: the
    /// first four; rewards and dones of every env are always served).
    #[arg(long, value_name = "LIST", value_parser = super::record::parse_envs, conflicts_with = "all_envs")]
    pub envs: Option<EnvList>,
    /// Serve every env.
    #[arg(long)]
    pub all_envs: bool,
    /// Serve camera images too (image region and streamed camera/viewport frames).
    #[arg(long)]
    pub images: bool,
    /// Frames a second at most; the newest frame goes when its turn comes
    /// (0: every frame).
    #[arg(long, value_name = "HZ", default_value_t = 0.0, allow_negative_numbers = true, value_parser = super::args::parse_rate)]
    pub max_hz: f64,
    /// Images a second at most per camera and stream, the newest kept (0: every image).
    #[arg(long, value_name = "HZ", default_value_t = 30.0, allow_negative_numbers = true, value_parser = super::args::parse_rate)]
    pub image_hz: f64,
    /// How the image region's images (and raw streamed frames) go out: raw as in the
    /// segment, or compressed (for a thin link; Foxglove shows either).
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t = ImageFormatArg::Raw, requires = "images")]
    pub image_format: ImageFormatArg,
    /// The quality of --image-format jpeg, 1 to 100.
    #[arg(long, value_name = "Q", default_value_t = 80, value_parser = clap::value_parser!(u8).range(1..=100))]
    pub jpeg_quality: u8,
    /// Offer services that toggle engine services through the control rings (on an
    /// address that is not loopback, only with TLS).
    #[arg(long)]
    pub allow_control: bool,
    /// Serve over TLS (wss://) with this PEM certificate (chain); with --tls-key.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM PKCS #8 private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Seconds a control call waits for the engine (units ms, s, min, h allowed).
    #[arg(long, value_name = "SECS", default_value = "5", allow_negative_numbers = true, value_parser = super::args::positive_seconds)]
    pub control_timeout: Duration,
    /// Stop after this many seconds (units ms, s, min, h allowed).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = super::args::positive_seconds)]
    pub duration: Option<Duration>,
    /// Also record the run into this MCAP file, from the same capture (until the
    /// engine is replaced).
    #[arg(long, value_name = "FILE")]
    pub record: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub compression: super::record::CompressionArgs,
    /// While the machine has no spare CPU, the frame follower uses at most this
    /// percent of one core and skips frames (counted); 0 follows every frame.
    #[arg(long, value_name = "PCT", default_value_t = lrbc_live::busy::DEFAULT_BUSY_BUDGET_PERCENT, allow_negative_numbers = true, value_parser = super::args::parse_percent)]
    pub busy_budget: f32,
    #[command(flatten)]
    pub detect: super::detection::DetectArgs,
}

/// `--image-format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ImageFormatArg {
    /// foxglove.RawImage: the bytes as they are.
    Raw,
    /// foxglove.CompressedImage, PNG: lossless, a few times smaller.
    Png,
    /// foxglove.CompressedImage, JPEG at --jpeg-quality: lossy, the smallest.
    Jpeg,
}

/// Runs `serve` with its arguments.
pub fn run_args(a: ServeArgs) -> Result<(), CliError> {
    let (target, choice, o) = a.options()?;
    run(&target, choice, o)
}

impl ServeArgs {
    /// What to serve, its layout, and how (on the monotonic clock).
    pub fn options(self) -> Result<(Target, LayoutChoice, ServeOptions), CliError> {
        if self.record.is_none() && self.compression.given() {
            return Err(CliError::Usage(
                "--compression and --compression-level are of the --record file; give --record FILE"
                    .into(),
            ));
        }
        Ok((
            self.target.require()?,
            self.target.layout,
            ServeOptions {
                listen: self.listen,
                envs: self.envs,
                all_envs: self.all_envs,
                images: self.images,
                duration: self.duration,
                max_hz: self.max_hz,
                image_hz: self.image_hz,
                image_format: match self.image_format {
                    ImageFormatArg::Raw => ImageEncoding::Raw,
                    ImageFormatArg::Png => ImageEncoding::Png,
                    ImageFormatArg::Jpeg => ImageEncoding::Jpeg {
                        quality: self.jpeg_quality,
                    },
                },
                allow_control: self.allow_control,
                control_timeout: self.control_timeout,
                busy_budget: (self.busy_budget > 0.0).then_some(self.busy_budget),
                record: self.record,
                compression: self.compression.compression()?,
                tls: self.tls_cert.zip(self.tls_key),
                detect: self.detect.settings()?,
                clock: Arc::new(MonotonicClock),
            },
        ))
    }
}

/// What `serve` serves, how, and where.
#[derive(Debug)]
pub struct ServeOptions {
    pub listen: Listen,
    pub envs: Option<EnvList>,
    pub all_envs: bool,
    pub images: bool,
    pub duration: Option<Duration>,
    /// Frames a second at most (0: every frame).
    pub max_hz: f64,
    /// Images a second at most per camera or stream (0: every image).
    pub image_hz: f64,
    /// Images raw or compressed.
    pub image_format: ImageEncoding,
    pub allow_control: bool,
    pub control_timeout: Duration,
    pub busy_budget: Option<f32>,
    /// Also record the run into this MCAP file, from the same capture.
    pub record: Option<std::path::PathBuf>,
    /// How that file's chunks are compressed.
    pub compression: lrbc_recording::format::Compression,
    /// The certificate and key files of TLS.
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// What the detector looks for (its events go on `/lrbc/events` and `/lrbc/log`).
    pub detect: lrbc_live::detect::DetectSettings,
    /// The clock of the frames' stamps, the messages' times and every period of the
    /// loop (`--duration` included): the monotonic one, or a manual one in tests.
    pub clock: Arc<dyn Clock>,
}

type FileRecorder = lrbc_recording::recorder::Recorder<std::io::BufWriter<std::fs::File>>;

/// The one capture of the run, feeding the server and, with `--record`, a file.
enum Feed {
    Capture(Box<Capture>),
    Recording(Box<FileRecorder>, std::path::PathBuf),
}

impl Feed {
    fn capture(&self) -> &Capture {
        match self {
            Self::Capture(c) => c,
            Self::Recording(r, _) => r.capture(),
        }
    }

    fn capture_mut(&mut self) -> &mut Capture {
        match self {
            Self::Capture(c) => c,
            Self::Recording(r, _) => r.capture_mut(),
        }
    }

    /// What was captured since the last call, appended to `out`.
    fn poll(&mut self, out: &mut Vec<Message>) -> Result<(), CliError> {
        match self {
            Self::Capture(c) => {
                c.poll(out);
                Ok(())
            }
            Self::Recording(r, path) => r
                .poll_into(Some(out))
                .map(|_| ())
                .map_err(|e| writing(path, &e)),
        }
    }

    /// Frames and images are encoded for the file whoever subscribes.
    fn set_encoding(&mut self, frames: bool, images: bool) {
        let recording = matches!(self, Self::Recording(..));
        self.capture_mut()
            .set_encoding(frames || recording, images || recording);
    }

    /// Ends a chunk of the file each second: a killed `serve` leaves a file that reads
    /// up to there.
    fn end_chunk(&mut self) -> Result<(), CliError> {
        match self {
            Self::Capture(_) => Ok(()),
            Self::Recording(r, path) => r.end_chunk().map_err(|e| writing(path, &e)),
        }
    }

    /// Completes the file, if there is one; the line that says so.
    fn finish(self) -> Result<Option<String>, CliError> {
        match self {
            Self::Capture(_) => Ok(None),
            Self::Recording(r, path) => {
                let c = r.finish().map_err(|e| writing(&path, &e))?;
                Ok(Some(format!(
                    "{} written: {} frames, {} ring entries, {} images",
                    path.display(),
                    c.frames_recorded,
                    c.ring_entries,
                    c.images
                )))
            }
        }
    }
}

fn writing(path: &std::path::Path, e: &lrbc_recording::recorder::RecordError) -> CliError {
    CliError::Other(format!("writing {}: {}", path.display(), e.cause()))
}

/// The envs served of a segment: as asked, those that exist.
fn envs_of(a: &Attached, o: &ServeOptions) -> Vec<u32> {
    let n = a.geometry.num_envs;
    if o.all_envs {
        return (0..n).collect();
    }
    match &o.envs {
        Some(list) => list.0.iter().copied().filter(|&e| e < n).collect(),
        None => (0..n.min(DEFAULT_ENVS)).collect(),
    }
}

fn capture_of(a: Attached, o: &ServeOptions) -> Result<Capture, CliError> {
    let envs = envs_of(&a, o);
    let mut capture = Capture::with_clock(a, envs, Arc::clone(&o.clock))
        .map_err(|e| CliError::Other(format!("cannot serve: {e}")))?;
    if o.images {
        capture = capture.with_images();
    }
    capture.set_busy_budget(o.busy_budget);
    capture
        .detect_with(o.detect.clone())
        .map_err(|e| CliError::Usage(format!("cannot serve: {e}")))?;
    Ok(capture)
}

/// Serves `target` until Ctrl-C or `--duration`.
pub fn run(target: &Target, choice: LayoutChoice, o: ServeOptions) -> Result<(), CliError> {
    run_until(target, choice, o, &stop_flag(), |_| {})
}

/// [`run`] until `stop` is set (or `--duration`), telling `listening` the port once the
/// server listens: `serve` in a thread of this process, as tests run it.
pub fn run_until(
    target: &Target,
    choice: LayoutChoice,
    o: ServeOptions,
    stop: &AtomicBool,
    listening: impl FnOnce(u16),
) -> Result<(), CliError> {
    lrbc_platform::set_timer_slack_ns(1_000);
    refuse_control_in_the_clear(&o)?;
    let tls = read_tls(&o)?;
    let a = attach(target, choice)?;
    if let Some(list) = &o.envs
        && let Some(&env) = list.0.iter().find(|&&e| e >= a.geometry.num_envs)
    {
        return Err(CliError::Other(format!(
            "env {env} does not exist (the segment has {} envs)",
            a.geometry.num_envs
        )));
    }
    let control = Arc::new(Mutex::new(None));
    let server = start_server(&o, &a, tls, &control)?;
    listening(server.port());
    let watcher = AttachmentWatch::new(a.reopen().map_err(CliError::Attach)?, Arc::clone(&o.clock));
    let feed = open_feed(capture_of(a, &o)?, &o)?;
    let mut serving = Serving {
        o: &o,
        server,
        feed,
        watcher,
        control,
        out: Vec::new(),
    };
    serving.advertise()?;
    serving
        .server
        .send_metadata(o.clock.now_ns(), serving.feed.capture().prelude());
    // An observer: this thread runs in the time the engine and trainer leave over; the
    // frame follower, started above, keeps its own priority.
    lrbc_platform::set_thread_role(lrbc_platform::ThreadRole::Background);
    let why = serving.serve_until_stopped(stop)?;
    serving.finish(why)
}

/// `--allow-control` off loopback only with TLS.
fn refuse_control_in_the_clear(o: &ServeOptions) -> Result<(), CliError> {
    if o.allow_control && !o.listen.is_loopback() && o.tls.is_none() {
        return Err(CliError::Usage(format!(
            "--allow-control on {} would send control in the clear to anyone who reaches it: \
             serve control on loopback (connect through `ssh -L {port}:localhost:{port} NODE`), \
             or give --tls-cert and --tls-key",
            o.listen,
            port = o.listen.port
        )));
    }
    Ok(())
}

/// A PEM certificate (chain) and its private key.
type TlsPem = (Vec<u8>, Vec<u8>);

/// The certificate and key of `--tls-cert` and `--tls-key`, read and checked.
fn read_tls(o: &ServeOptions) -> Result<Option<TlsPem>, CliError> {
    let Some((cert, key)) = &o.tls else {
        return Ok(None);
    };
    let read = |p: &std::path::Path| {
        std::fs::read(p).map_err(|e| CliError::Other(format!("cannot read {}: {e}", p.display())))
    };
    let (cert, key) = (read(cert)?, read(key)?);
    lrbc_remote::server::check_tls(&cert, &key)?;
    Ok(Some((cert, key)))
}

/// Starts the WebSocket server (with the control services if asked, on `control`) and
/// says where it listens, with a warning when it is not loopback.
fn start_server(
    o: &ServeOptions,
    a: &Attached,
    tls: Option<TlsPem>,
    control: &Arc<Mutex<Option<Attached>>>,
) -> Result<Server, CliError> {
    let scheme = if tls.is_some() { "wss" } else { "ws" };
    let services = if o.allow_control {
        *lrbc::sync::lock(control) = a.reopen().ok();
        lrbc_remote::server::control_services(Arc::clone(control), o.control_timeout)
    } else {
        Vec::new()
    };
    let server = Server::start(ServerSettings {
        host: o.listen.host.clone(),
        port: o.listen.port,
        frame_hz: o.max_hz,
        image_hz: o.image_hz,
        image_format: o.image_format,
        services,
        tls,
    })?;
    let shown_host = if o.listen.host.contains(':') {
        format!("[{}]", o.listen.host)
    } else {
        o.listen.host.clone()
    };
    println!("listening on {scheme}://{shown_host}:{}", server.port());
    // A closed stdout is no reason to stop serving.
    let _ = std::io::stdout().flush();
    if !o.listen.is_loopback() {
        eprintln!(
            "warning: serving on {shown_host}:{}: anyone who can reach this address can watch the run \
             (the protocol has no authentication); bind 127.0.0.1 and use `ssh -L` to be safe",
            server.port()
        );
    }
    Ok(server)
}

/// The run's capture, recorded into `--record`'s file if asked.
fn open_feed(capture: Capture, o: &ServeOptions) -> Result<Feed, CliError> {
    Ok(match &o.record {
        Some(path) => {
            let file = std::fs::File::create(path)
                .map_err(|e| CliError::Other(format!("{}: {e}", path.display())))?;
            let rec = lrbc_recording::recorder::Recorder::with_compression(
                capture,
                std::io::BufWriter::new(file),
                o.compression,
            )
            .map_err(|e| writing(path, &e))?;
            Feed::Recording(Box::new(rec), path.clone())
        }
        None => Feed::Capture(Box::new(capture)),
    })
}

/// What `serve` holds while it serves.
struct Serving<'o> {
    o: &'o ServeOptions,
    server: Server,
    feed: Feed,
    watcher: AttachmentWatch<Arc<dyn Clock>>,
    /// The attachment the control services use (re-attached with the watcher).
    control: Arc<Mutex<Option<Attached>>>,
    out: Vec<Message>,
}

impl Serving<'_> {
    /// Advertises the capture's channels not advertised yet.
    fn advertise(&mut self) -> Result<(), CliError> {
        Ok(self.server.advertise(self.feed.capture().prelude())?)
    }

    /// Serves until Ctrl-C or `--duration`: the capture's messages as they come, the
    /// segment's state four times a second, the progress line and status each second.
    /// Why it stopped.
    fn serve_until_stopped(&mut self, stop: &AtomicBool) -> Result<&'static str, CliError> {
        let clock = Arc::clone(&self.o.clock);
        let started = clock.now_ns();
        let after = |ns: u64, d: Duration| {
            ns.saturating_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
        };
        let deadline = self.o.duration.map(|d| after(started, d));
        let mut reattached = self.watcher.reattach_count;
        let mut report = self.watcher.tick();
        let mut next_state = after(started, STATE_EVERY);
        let mut next_line = after(started, Duration::from_secs(1));
        let mut last = (Counts::default(), ServeCounts::default(), started);
        let mut told_dropped = 0;
        let mut seen = BTreeMap::new();
        loop {
            self.pass_messages()?;
            // Relaxed: a flag with no data behind it.
            if stop.load(Ordering::Relaxed) {
                return Ok("stopped");
            }
            if deadline.is_some_and(|d| clock.now_ns() >= d) {
                return Ok("duration reached");
            }
            if clock.now_ns() >= next_state {
                next_state = after(next_state, STATE_EVERY);
                let previous = (report.state, report.note.clone());
                report = self.watcher.tick();
                if let Some(note) = &report.note
                    && (report.state, Some(note)) != (previous.0, previous.1.as_ref())
                {
                    log_line(format!("{}: {note}", report.state.as_str()));
                }
                if self.watcher.reattach_count != reattached {
                    reattached = self.watcher.reattach_count;
                    self.serve_the_new_segment()?;
                }
            }
            if clock.now_ns() >= next_line {
                next_line = after(next_line, Duration::from_secs(1));
                self.feed.end_chunk()?;
                last = self.report_second(&report, &last, &mut told_dropped, &mut seen);
            }
        }
    }

    /// Hands what the capture has to the server (advertising new channels first), or
    /// waits a little for it.
    fn pass_messages(&mut self) -> Result<(), CliError> {
        let (frames_wanted, images_wanted) = self.server.wants();
        self.feed.set_encoding(frames_wanted, images_wanted);
        self.feed.poll(&mut self.out)?;
        // Streams add channels as they show up: advertised before their messages go.
        self.advertise()?;
        let now = self.o.clock.now_ns();
        if self.out.is_empty() {
            self.server.tick(now);
            self.feed.capture().wait(RING_EVERY);
        } else {
            self.server.publish(now, self.out.drain(..));
        }
        Ok(())
    }

    /// The watcher attached to a new segment: the old capture ends (its recording
    /// complete), a capture of the new one is served, and the clients are told.
    fn serve_the_new_segment(&mut self) -> Result<(), CliError> {
        let new = self.watcher.attached().reopen().map_err(CliError::Attach)?;
        if self.o.allow_control {
            *lrbc::sync::lock(&self.control) = new.reopen().ok();
        }
        // The old capture's last messages go first; a recording of the old
        // segment is complete (the new one may have other envs and channels).
        self.feed.capture_mut().stop_following();
        self.feed.poll(&mut self.out)?;
        self.server
            .publish(self.o.clock.now_ns(), self.out.drain(..));
        let old = std::mem::replace(
            &mut self.feed,
            Feed::Capture(Box::new(capture_of(new, self.o)?)),
        );
        if let Some(line) = old.finish()? {
            log_line(format!(
                "the segment was replaced: {line}; the new segment is served, not recorded"
            ));
        }
        let capture = self.feed.capture();
        self.server
            .replace(self.o.clock.now_ns(), capture.prelude())?;
        self.server.tell_clients(
            "lrbc.attach",
            false,
            &format!(
                "serving a new segment ({} envs)",
                capture.attached().geometry.num_envs
            ),
        );
        Ok(())
    }

    /// The second's progress line and status message, and a word to the clients when
    /// the rate limits held back more; what the next second is measured against.
    fn report_second(
        &mut self,
        report: &Report,
        last: &(Counts, ServeCounts, u64),
        told_dropped: &mut u64,
        seen: &mut BTreeMap<u64, ClientCounts>,
    ) -> (Counts, ServeCounts, u64) {
        let (counts, served) = (self.feed.capture().counts(), self.server.counts());
        let now = self.o.clock.now_ns();
        let secs = lrbc::clock::secs_between(last.2, now).max(1e-3);
        let (views, _, _) = self.server.client_views();
        let line = progress(report, &counts, &served, last, secs, &views, seen);
        log_line(line);
        let a = self.watcher.attached();
        let flags = (a.geometry.counters.ext).and_then(|e| a.segment.load_u32(e.service_flags));
        self.server.send_status(
            now,
            &status_json(report, flags, &counts, &served, self.server.clients()),
        );
        let dropped = served.frames_dropped + served.images_dropped;
        if dropped > *told_dropped {
            *told_dropped = dropped;
            self.server.tell_clients(
                "lrbc.dropped",
                false,
                &format!(
                    "held back by the rate limits so far: {} frames (--max-hz), {} images (--image-hz)",
                    served.frames_dropped, served.images_dropped
                ),
            );
        }
        (counts, served, now)
    }

    /// Stops the server, completes the file and says what was served.
    fn finish(self, why: &str) -> Result<(), CliError> {
        let Self { server, feed, .. } = self;
        let served = server.counts();
        let (views, gone, mut delivered) = server.client_views();
        server.stop();
        for v in &views {
            delivered.add(&v.counts);
        }
        let finished = feed.finish();
        if let Ok(Some(line)) = &finished {
            log_line(line.clone());
        }
        log_line(format!(
            "{why}; {} messages ({} frames, {} images) handed to {} clients ({} at the end): {} frames delivered, {} conflated, {} dropped; {} images delivered; {:.1} MB written",
            served.messages,
            served.frames,
            served.images,
            views.len() + gone,
            views.len(),
            delivered.frames.delivered,
            delivered.frames.conflated,
            delivered.frames.dropped,
            delivered.images.delivered,
            delivered.bytes as f64 / 1e6
        ));
        // A standard error nobody reads does not hold up the exit.
        lrbc_remote::server::flush_log(Duration::from_millis(500));
        finished.map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_addresses_parse_and_know_loopback() {
        let l = parse_listen("127.0.0.1:8765").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            (l.host.as_str(), l.port, l.is_loopback()),
            ("127.0.0.1", 8765, true)
        );
        let l = parse_listen("[::1]:0").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((l.host.as_str(), l.port, l.is_loopback()), ("::1", 0, true));
        assert!(parse_listen("localhost:1").is_ok_and(|l| l.is_loopback()));
        assert!(parse_listen("0.0.0.0:8765").is_ok_and(|l| !l.is_loopback()));
        assert!(parse_listen("10.1.2.3:80").is_ok_and(|l| !l.is_loopback()));
        for bad in ["8765", "host:", ":8765", "h:99999", "h:x", "a b:1"] {
            assert!(parse_listen(bad).is_err(), "{bad}");
        }
    }
}
