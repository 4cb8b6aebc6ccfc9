//! The served runs the window is connected to: the one shown (the session) and those in
//! the background (`nodes`), each a row in the Attach view; connecting, adding one
//! without showing it, and showing another.

use std::sync::Arc;

use super::InspectorApp;
use crate::session::{NodeRow, Session};

impl InspectorApp {
    /// Views the run served at `url` (`ws://HOST:PORT`); the panels show once the
    /// server has described it, the status bar the link meanwhile. A malformed address
    /// is shown in the attach view.
    pub fn connect(&mut self, url: &str) {
        // A server connected already is shown; the one shown goes on in the background.
        if let Some(addr) = self.connected(url) {
            self.show_node(&addr);
            return;
        }
        self.park_session();
        match self.connect_session(url) {
            Ok(s) => {
                let shown = lrbc_remote::view::client::normalize(url)
                    .unwrap_or_else(|_| format!("ws://{}", s.label()));
                self.settings.remember(&shown);
                self.say(format!("connecting to {}", s.label()), false);
                self.shown(s);
            }
            Err(e) => self.not_shown(e),
        }
    }

    /// Ends the session shown, but for a served run, which goes on in the background
    /// (its row is in the Attach view).
    pub(super) fn park_session(&mut self) {
        match self.session.take() {
            Some(s) if s.remote().is_some() => self.nodes.push(s),
            _ => {}
        }
    }

    /// Connects to another server without showing it (its row is in the Attach view).
    pub fn add_node(&mut self, url: &str) {
        if self.connected(url).is_some() {
            return;
        }
        match self.connect_session(url) {
            Ok(s) => self.nodes.push(s),
            Err(e) => self.say(e, true),
        }
    }

    /// `HOST:PORT` of `url` when that server is connected already (shown or not).
    fn connected(&self, url: &str) -> Option<String> {
        let addr = lrbc_remote::view::client::host_port(url).ok()?;
        (self.session.iter().chain(&self.nodes))
            .any(|s| s.remote().is_some() && s.label() == addr)
            .then_some(addr)
    }

    /// A session viewing the run served at `url`, with the window's settings.
    fn connect_session(&self, url: &str) -> Result<Session, String> {
        Session::connect(
            url,
            self.settings.sampler(),
            self.settings.traffic_limits(),
            Arc::clone(&self.waker),
        )
    }

    /// Shows the server `addr` (`HOST:PORT`) in the panels; the served run shown before
    /// goes on in the background.
    pub fn show_node(&mut self, addr: &str) {
        let Some(i) = self.nodes.iter().position(|n| n.label() == addr) else {
            // Shown already.
            self.show_attach = false;
            return;
        };
        let node = self.nodes.remove(i);
        match self.session.take() {
            Some(s) if s.remote().is_some() => self.nodes.insert(i, s),
            _ => {}
        }
        self.say(format!("showing {addr}"), false);
        self.shown(node);
    }

    /// One row per server connected (the one shown first), for the Attach view.
    pub fn node_rows(&self) -> Vec<NodeRow> {
        self.session
            .iter()
            .chain(&self.nodes)
            .filter_map(Session::node_row)
            .collect()
    }
}
