//! `serve` for the tests: the process and its log, or a thread on the test's clock; and
//! reading it with the crate's own client (channels by topic, messages until enough
//! came, a control call).

use std::collections::BTreeMap;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Parser as _;

use crossbeam_channel::Receiver;
use lrbc::clock::Clock;
use lrbc_inspector::cli::{Cli, CliError, Command, serve};
use lrbc_remote::view::Connection;
use lrbc_remote::view::wire::ServerMessage;

use super::{DEADLINE, Guarded, inspector, line_channel, next_line};

/// A running `serve`: the process, its address and its log lines (stderr).
pub struct Serve {
    /// Killed when the test ends.
    pub child: Guarded,
    pub url: String,
    pub log: Receiver<String>,
}

impl Serve {
    /// `serve --shm NAME --listen 127.0.0.1:0 ARGS`, once it says where it listens.
    pub fn start(name: &str, args: &[&str]) -> Self {
        Self::start_on(name, "127.0.0.1:0", args)
    }

    /// `serve --shm NAME --listen LISTEN ARGS`, once it says where it listens.
    pub fn start_on(name: &str, listen: &str, args: &[&str]) -> Self {
        let mut child = inspector()
            .args([
                "serve",
                "--shm",
                name,
                "--listen",
                listen,
                "--busy-budget",
                "0",
            ])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = line_channel(child.stdout.take().unwrap());
        let log = line_channel(child.stderr.take().unwrap());
        let first = next_line(&out, "serve's first line");
        let url = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first line: {first}"))
            .to_string();
        assert!(
            url.starts_with("ws://") || url.starts_with("wss://"),
            "{url}"
        );
        Self {
            child: Guarded::new(child),
            url,
            log,
        }
    }

    pub fn connect(&self) -> Connection {
        Connection::connect(&self.url, Duration::from_secs(10)).unwrap()
    }

    /// Waits for a log line holding `text`.
    pub fn log_line(&self, text: &str) -> String {
        let deadline = Instant::now() + DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(line) if line.contains(text) => return line,
                Ok(_) => {}
                Err(_) => panic!("serve said nothing with {text:?}"),
            }
        }
    }
}

/// `serve` in a thread of this process on a clock of the test's: `serve --shm NAME
/// --listen 127.0.0.1:0 --busy-budget 0 ARGS` as the command line reads it. It stops
/// (and its thread ends) when dropped.
pub struct ServeHere {
    pub url: String,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<Result<(), CliError>>>,
}

impl ServeHere {
    pub fn start(name: &str, args: &[&str], clock: Arc<dyn Clock>) -> Self {
        let cli = Cli::try_parse_from(
            [
                "lrbc-inspector",
                "serve",
                "--shm",
                name,
                "--listen",
                "127.0.0.1:0",
                "--busy-budget",
                "0",
            ]
            .iter()
            .chain(args),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let Some(Command::Serve(args)) = cli.command else {
            panic!("not serve's arguments");
        };
        let (target, choice, mut o) = args.options().unwrap();
        o.clock = clock;
        let stop = Arc::new(AtomicBool::new(false));
        let (port_tx, port_rx) = crossbeam_channel::bounded(1);
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("serve".into())
            .spawn(move || {
                serve::run_until(&target, choice, o, &stopped, |port| {
                    let _ = port_tx.send(port);
                })
            })
            .unwrap();
        let Ok(port) = port_rx.recv_timeout(DEADLINE) else {
            // It ended before it listened: why.
            panic!("serve did not listen: {:?}", thread.join());
        };
        Self {
            url: format!("ws://127.0.0.1:{port}"),
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for ServeHere {
    fn drop(&mut self) {
        // Relaxed: a flag with no data behind it (serve's loop reads it each turn).
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            match t.join() {
                Ok(Ok(())) => {}
                // A test that failed may have failed for this: it is said either way.
                ended if std::thread::panicking() => eprintln!("serve ended: {ended:?}"),
                ended => panic!("serve ended: {ended:?}"),
            }
        }
    }
}

/// Waits until the channels with these topics are advertised; their ids.
pub fn channels(c: &mut Connection, topics: &[&str]) -> Vec<u64> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let ids: Vec<Option<u64>> = topics
            .iter()
            .map(|t| {
                c.channels
                    .values()
                    .find(|ch| ch.topic == *t)
                    .map(|ch| ch.id)
            })
            .collect();
        if ids.iter().all(Option::is_some) {
            return ids.into_iter().flatten().collect();
        }
        assert!(Instant::now() < deadline, "not advertised: {topics:?}");
        c.next(Duration::from_millis(100)).unwrap();
    }
}

pub type ByTopic = BTreeMap<String, Vec<(u64, Vec<u8>)>>;

/// Messages by topic until at least the counts wanted came on each topic named.
pub fn collect(c: &mut Connection, want: &[(&str, usize)]) -> ByTopic {
    let deadline = Instant::now() + DEADLINE;
    let mut out = ByTopic::new();
    let done = |out: &ByTopic| {
        want.iter()
            .all(|(t, n)| out.get(*t).map_or(0, Vec::len) >= *n)
    };
    while !done(&out) {
        let counts: Vec<_> = out.iter().map(|(t, v)| (t, v.len())).collect();
        assert!(Instant::now() < deadline, "wanted {want:?}, got {counts:?}");
        if let Some(ServerMessage::MessageData {
            subscription,
            log_time,
            data,
        }) = c.next(Duration::from_millis(100)).unwrap()
            && let Some(ch) = c.channel_of(subscription)
        {
            out.entry(ch.topic.clone())
                .or_default()
                .push((log_time, data));
        }
    }
    out
}

/// Messages on `topic` until `n` came.
pub fn messages(c: &mut Connection, topic: &str, n: usize) -> Vec<(u64, Vec<u8>)> {
    collect(c, &[(topic, n)]).remove(topic).unwrap_or_default()
}

/// Turns the engine's camera service off through the server's control service (once it
/// is advertised) and waits for the answer; a failed call fails the test.
pub fn camera_off(c: &mut Connection) {
    let deadline = Instant::now() + DEADLINE;
    while !c.services.contains_key("/lrbc/control/set_service") {
        assert!(Instant::now() < deadline, "no control service advertised");
        c.next(Duration::from_millis(100)).unwrap();
    }
    let call = c
        .call(
            "/lrbc/control/set_service",
            br#"{"service":"camera","enabled":false}"#,
        )
        .unwrap();
    loop {
        assert!(Instant::now() < deadline, "no answer to the control call");
        match c.next(Duration::from_millis(100)).unwrap() {
            Some(ServerMessage::ServiceResponse { call_id, .. }) if call_id == call => break,
            Some(ServerMessage::ServiceCallFailure { message, .. }) => panic!("{message}"),
            _ => {}
        }
    }
}
