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
    /// Frames received, and a second over the last second.
    pub frames: u64,
    pub frames_per_sec: f64,
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
            frames: 0,
            frames_per_sec: 0.0,
            frames_not_received: 0,
            control: false,
            note: None,
            served: None,
        }
    }

    /// The link's rate, bits/s: what the server measured of this client's link (the
    /// bytes it acknowledged; `client.link_bytes_per_s` of its status) where it says,
    /// else what arrived.
    pub fn bits_per_sec(&self) -> f64 {
        let measured = (self.served.as_ref())
            .and_then(|s| s["client"]["link_bytes_per_s"].as_f64())
            .filter(|r| *r > 0.0);
        8.0 * measured.unwrap_or(self.bytes_per_sec)
    }

    /// One line: "connected · link 4.8 Mbit/s · 21 of 1,000 frames/s · age 140 ms (p99
    /// 180) · 0 frames not received", or why not.
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
                let age = self.latency_ms.map_or("age …".into(), |(p50, p99)| {
                    format!("age {} ms (p99 {})", ms(p50), ms(p99))
                });
                let run = (self.served.as_ref())
                    .and_then(|s| s["frame_hz"].as_f64())
                    .map_or(String::new(), |hz| format!(" of {}", thousands(hz)));
                format!(
                    "connected · link {:.1} Mbit/s · {}{run} frames/s · {age} · {} frames not received",
                    self.bits_per_sec() / 1e6,
                    thousands(self.frames_per_sec),
                    self.frames_not_received
                )
            }
        }
    }
}

/// Milliseconds as read at a glance: a tenth below 10 ms (loopback), whole above.
fn ms(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// A rate rounded, with thousands separated: 1,000.
fn thousands(x: f64) -> String {
    let n = x.max(0.0).round() as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
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
        l.latency_ms = Some((140.2, 181.0));
        l.bytes_per_sec = 2.5e6;
        l.frames_per_sec = 21.0;
        l.frames_not_received = 3;
        assert_eq!(
            l.summary(),
            "connected · link 20.0 Mbit/s · 21 frames/s · age 140 ms (p99 181) · 3 frames not received"
        );
        // The server's measure of the link and the run's rate, from its status.
        l.served = Some(serde_json::json!({
            "frame_hz": 1000.2,
            "client": {"link_bytes_per_s": 600_000.0},
        }));
        assert_eq!(
            l.summary(),
            "connected · link 4.8 Mbit/s · 21 of 1,000 frames/s · age 140 ms (p99 181) · 3 frames not received"
        );
        l.latency_ms = Some((0.24, 1.04));
        assert!(
            l.summary().contains("age 0.2 ms (p99 1.0)"),
            "{}",
            l.summary()
        );
    }
}
