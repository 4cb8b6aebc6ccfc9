//! A connected client as the server and the client's connection thread share it: its
//! [`Outbox`] and subscriptions under one lock, and its figures ([`PeerView`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};

use super::outbox::{Class, ClientCounts, Out, Outbox, Payload};
use crate::protocol;
use lrbc::sync::lock;

/// The reliable messages a client may have waiting before it is disconnected.
pub const RELIABLE_LIMIT: usize = 32 << 20;

/// A client's figures, refreshed each second by its thread.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct PeerView {
    pub id: u64,
    pub addr: String,
    pub counts: ClientCounts,
    /// What the peer acknowledged a second, bytes (where the system says).
    pub link_bytes_per_s: Option<f64>,
    /// Bytes written and not yet acknowledged.
    pub queued_bytes: Option<u64>,
    /// What the connection may hold unacknowledged now.
    pub budget_bytes: Option<u64>,
}

/// What a client's thread and the server change of a client, under its lock.
#[derive(Debug)]
pub(super) struct PeerState {
    pub(super) outbox: Outbox,
    /// Channel → the client's subscription id.
    pub(super) subs: BTreeMap<u64, u32>,
    /// Why the server closes this client (it cannot take even the reliable messages).
    pub(super) closing: Option<String>,
    pub(super) view: PeerView,
}

impl PeerState {
    /// Queues `out` of `channel`; a client that cannot take even the reliable
    /// messages is marked to be closed, and what waits for it dropped.
    fn queue(&mut self, channel: u64, out: Out) {
        if self.closing.is_none()
            && let Err(over) = self.outbox.push(channel, out)
        {
            self.closing = Some(format!(
                "it did not take even the ring traffic ({:.1} MiB waiting)",
                over.0 as f64 / f64::from(1 << 20)
            ));
            self.outbox.clear();
        }
    }
}

/// A connected client, shared by its thread and the server that hands it messages.
#[derive(Debug)]
pub struct Peer {
    pub id: u64,
    pub addr: String,
    pub(super) state: Mutex<PeerState>,
    pub(super) wake: Condvar,
}

impl Peer {
    pub(super) fn new(id: u64, addr: String) -> Self {
        Self {
            id,
            state: Mutex::new(PeerState {
                outbox: Outbox::new(RELIABLE_LIMIT),
                subs: BTreeMap::new(),
                closing: None,
                view: PeerView {
                    id,
                    addr: addr.clone(),
                    ..PeerView::default()
                },
            }),
            addr,
            wake: Condvar::new(),
        }
    }

    /// Queues a message of `channel` (0: none) for the client.
    pub fn push(&self, channel: u64, out: Out) {
        lock(&self.state).queue(channel, out);
        self.wake.notify_one();
    }

    /// Queues a text message.
    pub fn push_text(&self, text: String) {
        self.push(
            0,
            Out {
                class: Class::Reliable,
                payload: Payload::Text(text),
            },
        );
    }

    /// Queues a message of `channel` if the client subscribes to it; true if it does.
    pub fn offer(&self, channel: u64, class: Class, log_time: u64, data: &Arc<[u8]>) -> bool {
        {
            // One lock: the subscription looked up is the one the message is queued for.
            let mut s = lock(&self.state);
            let Some(sub) = s.subs.get(&channel).copied() else {
                return false;
            };
            let payload = Payload::Data {
                header: protocol::message_data_header(sub, log_time),
                data: Arc::clone(data),
            };
            s.queue(channel, Out { class, payload });
        }
        self.wake.notify_one();
        true
    }

    pub fn subscribes(&self, channel: u64) -> bool {
        lock(&self.state).subs.contains_key(&channel)
    }

    /// Forgets subscriptions to `channels` (they went), their waiting messages counted
    /// as dropped.
    pub fn forget(&self, channels: &[u64]) {
        let mut s = lock(&self.state);
        for c in channels {
            s.subs.remove(c);
            s.outbox.forget(*c);
        }
    }

    pub fn view(&self) -> PeerView {
        let s = lock(&self.state);
        PeerView {
            counts: s.outbox.counts,
            ..s.view.clone()
        }
    }

    pub fn wake(&self) {
        self.wake.notify_one();
    }
}
