//! The link to a server as the window shows it: [`LinkState`] and [`Link`] (latency,
//! bytes, frames not received, the server's status), and its one-line summary.

use std::time::{Duration, Instant};

/// Where the connection stands.
#[derive(Clone, Debug, PartialEq)]
pub enum LinkState {
    Connecting,
    Connected,
    /// The last attempt failed or the connection ended; the next attempt comes after
    /// `retry_in` from `since`.
    Waiting {
        error: String,
        since: Instant,
        retry_in: Duration,
    },
}

/// The link to the server, for the status bar and the window's title.
#[derive(Clone, Debug)]
pub struct Link {
    /// `HOST:PORT`.
    pub addr: String,
    pub state: LinkState,
    pub server_name: String,
    pub session_id: Option<String>,
    /// Times the server came back with a new session id (a restarted server).
    pub restarts: u64,
    /// Times the connection was made again after it ended.
    pub reconnects: u64,
    /// From the server's time of a message to its arrival, over the last second (ms):
    /// p50 and p99. The two clocks are the machines' real-time clocks.
    pub latency_ms: Option<(f64, f64)>,
    pub bytes_per_sec: f64,
    pub messages_per_sec: f64,
    pub bytes: u64,
    pub messages: u64,
    /// Frames between two that arrived, never received: missed by the server's capture,
    /// held back by its limits, or dropped from this client's queue.
    pub frames_not_received: u64,
    /// The server offers the control services (`serve --allow-control`).
    pub control: bool,
    /// The server's last status message (a warning, or the frames held back).
    pub note: Option<String>,
    /// The server's last `/lrbc/serve/status`.
    pub served: Option<serde_json::Value>,
}

impl Link {
    pub(super) fn new(addr: String) -> Self {
        Self {
            addr,
            state: LinkState::Connecting,
            server_name: String::new(),
            session_id: None,
            restarts: 0,
            reconnects: 0,
            latency_ms: None,
            bytes_per_sec: 0.0,
            messages_per_sec: 0.0,
            bytes: 0,
            messages: 0,
            frames_not_received: 0,
            control: false,
            note: None,
            served: None,
        }
    }

    /// One line: "connected · 0.2 ms · 1.3 MB/s · 0 dropped", or why not.
    pub fn summary(&self) -> String {
        match &self.state {
            LinkState::Connecting => format!("connecting to {}…", self.addr),
            LinkState::Waiting {
                error,
                since,
                retry_in,
            } => {
                let left = retry_in.saturating_sub(since.elapsed());
                format!(
                    "{error}; trying again in {:.0} s",
                    left.as_secs_f64().ceil()
                )
            }
            LinkState::Connected => {
                let latency = self.latency_ms.map_or("latency …".into(), |(p50, p99)| {
                    format!("latency {p50:.1} ms (p99 {p99:.1})")
                });
                format!(
                    "connected · {latency} · {:.2} MB/s · {} frames not received",
                    self.bytes_per_sec / 1e6,
                    self.frames_not_received
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_says_why_it_waits_and_when_it_tries_again() {
        let mut l = Link::new("node:8765".into());
        assert_eq!(l.summary(), "connecting to node:8765…");
        l.state = LinkState::Waiting {
            error: "cannot connect to node:8765: refused".into(),
            since: Instant::now(),
            retry_in: Duration::from_secs(2),
        };
        assert_eq!(
            l.summary(),
            "cannot connect to node:8765: refused; trying again in 2 s"
        );
        l.state = LinkState::Connected;
        l.latency_ms = Some((0.3, 1.5));
        l.bytes_per_sec = 2.5e6;
        l.frames_not_received = 3;
        assert_eq!(
            l.summary(),
            "connected · latency 0.3 ms (p99 1.5) · 2.50 MB/s · 3 frames not received"
        );
    }
}
