//! Serving a run live over the Foxglove WebSocket protocol (subprotocol
//! `foxglove.sdk.v1`): the channels, schemas and messages of a recording, from the same
//! [`Capture`](lrbc_recording::recorder::Capture), as they happen.
//!
//! - Each channel of the capture's prelude is a channel of the server, with the same
//!   topic, encoding and schema; streams add channels as they show up, and a new capture
//!   (the engine restarted, the segment was replaced) re-advertises them all.
//! - The metadata records of a recording go on [`METADATA_TOPIC`], one JSON message per
//!   record (`{"name": …, "metadata": {…}}`), to each client as it subscribes and to
//!   every subscriber when they change; [`STATUS_TOPIC`] carries the run's state, rates
//!   and counts once a second, with the figures of the client it goes to.
//! - Times are Unix nanoseconds on the wire (a recording's are the machine's monotonic
//!   clock): `lrbc.clock` says the difference.
//! - Nothing is encoded for a channel nobody subscribes to; limited channels (frames,
//!   images) send the newest message at most at their rate (`pace`).
//! - Each client has a connection of its own (`connection`, on its own thread; `peer`,
//!   what it and the server share of the client): the ring traffic, state changes,
//!   metadata and status all reach it, in order; of frames and images it gets the
//!   newest of each channel as fast as its link takes them
//!   (`outbox`, `budget`), the rest counted as conflated. A client that cannot take
//!   even the ring traffic is disconnected and told why; one that answers nothing for
//!   15 s is dropped. Nothing a client does holds up the others or the server's stop.

mod budget;
mod compress;
mod connection;
mod hub;
mod log;
mod outbox;
mod pace;
mod peer;
mod services;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

pub use connection::SILENT;
pub use hub::{CallRefused, Handler, HandlerError, MAX_CONNECTIONS, Service};
pub use log::{flush as flush_log, line as log_line};
pub use outbox::{ClientCounts, Tally};
pub use peer::PeerView;
pub use services::control_services;

use crate::protocol::{self, CLOCK_METADATA, ChannelAd, METADATA_TOPIC, STATUS_TOPIC, TlsError};
use hub::Hub;
use lrbc_recording::recorder::{Kind, Message, Prelude};
use outbox::Class;

/// How long the server's stop waits for its clients' threads.
const STOP_WAIT: Duration = Duration::from_millis(1_000);

/// Where and how to serve.
#[derive(Debug)]
pub struct ServerSettings {
    pub host: String,
    pub port: u16,
    /// Frames a second at most on the frame channel (0: every frame).
    pub frame_hz: f64,
    /// Images a second at most on each image channel (0: every image).
    pub image_hz: f64,
    /// How the image region's camera images (and raw streamed frames) go out: raw, or
    /// compressed on a thread of the server's as `foxglove.CompressedImage`.
    pub image_format: lrbc_recording::format::ImageEncoding,
    /// The services clients may call (none: control is not offered).
    pub services: Vec<Service>,
    /// TLS: a PEM certificate (chain) and its PKCS #8 private key (PEM); None: plain.
    pub tls: Option<(Vec<u8>, Vec<u8>)>,
}

/// Checks a PEM certificate chain and a PEM PKCS #8 private key before serving with
/// them; the error says which file is wrong and why.
pub fn check_tls(cert: &[u8], key: &[u8]) -> Result<(), TlsError> {
    if cfg!(not(feature = "tls")) {
        return Err(TlsError::NotBuilt);
    }
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
    let certs = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(TlsError::NotCertificate)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate);
    }
    PrivatePkcs8KeyDer::from_pem_slice(key).map_err(TlsError::NoKey)?;
    Ok(())
}

/// Why serving could not start, as one line.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {cause}")]
    Listen { addr: String, cause: String },
    #[error("cannot create the channel {topic}: {cause}")]
    Channel { topic: String, cause: String },
}

/// What the server sent and held back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ServeCounts {
    /// Messages handed to the clients (at least one subscriber).
    pub messages: u64,
    pub bytes: u64,
    pub frames: u64,
    pub images: u64,
    /// Frames replaced by a newer one before their turn came (`--max-hz`).
    pub frames_dropped: u64,
    /// Images replaced by a newer one before their turn came (`--image-hz`), or while
    /// the one before was compressed (`--image-format`).
    pub images_dropped: u64,
    /// Images that could not be compressed (`--image-format`), not sent.
    pub images_not_compressed: u64,
    /// Messages not encoded because nobody subscribed to their channel.
    pub unsubscribed: u64,
    /// Frames' summaries handed to the clients.
    pub summaries: u64,
}

/// TLS settings of the server from a PEM certificate chain and a PEM PKCS #8 key.
#[cfg(feature = "tls")]
fn tls_config(cert: &[u8], key: &[u8]) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let certs = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(TlsError::Cert)?;
    let key = PrivatePkcs8KeyDer::from_pem_slice(key).map_err(TlsError::Key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, PrivateKeyDer::Pkcs8(key))?;
    Ok(Arc::new(config))
}

#[cfg(not(feature = "tls"))]
fn tls_config(_cert: &[u8], _key: &[u8]) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    Err(TlsError::NotBuilt)
}

/// A running server of one run.
pub struct Server {
    hub: Arc<Hub>,
    port: u16,
    acceptor: Option<std::thread::JoinHandle<()>>,
    /// The server's channel ids, indexed as the prelude's.
    channels: Vec<u64>,
    kinds: Vec<ChannelKind>,
    status: u64,
    metadata: u64,
    summary: u64,
    pacer: pace::Pacer,
    /// The encoder of `--image-format png|jpeg`.
    compressor: Option<compress::Compressor>,
    /// Per prelude channel: its raw images go through the compressor.
    compressed: Vec<bool>,
    frame_hz: f64,
    image_hz: f64,
    /// Unix time minus the monotonic clock, in ns, at start.
    unix_minus_monotonic_ns: i128,
    counts: ServeCounts,
    /// Frames and images dropped by the limits of the channels of earlier captures.
    dropped_before: (u64, u64),
    due: Vec<Message>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChannelKind {
    Frame,
    Image,
    Other,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("port", &self.port)
            .field("channels", &self.channels.len())
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

fn json_channel(topic: &str) -> ChannelAd {
    ChannelAd {
        id: 0,
        topic: topic.into(),
        encoding: "json".into(),
        schema_name: String::new(),
        schema_encoding: None,
        schema: Vec::new(),
    }
}

fn class_of(kind: Kind) -> Class {
    match kind {
        Kind::Frame => Class::Frame,
        Kind::Image => Class::Image,
        _ => Class::Reliable,
    }
}

impl Server {
    /// Listens on `settings.host:settings.port` (port 0: any free port).
    pub fn start(settings: ServerSettings) -> Result<Self, ServeError> {
        let addr = format!("{}:{}", settings.host, settings.port);
        let listen_error = |cause: String| ServeError::Listen {
            addr: addr.clone(),
            cause,
        };
        let tls = match &settings.tls {
            Some((cert, key)) => {
                Some(tls_config(cert, key).map_err(|e| listen_error(e.to_string()))?)
            }
            None => None,
        };
        let listener = std::net::TcpListener::bind((settings.host.as_str(), settings.port))
            .map_err(|e| listen_error(e.to_string()))?;
        let port = listener
            .local_addr()
            .map_err(|e| listen_error(e.to_string()))?
            .port();
        let hub = Hub::new(
            format!("lrbc-inspector {}", env!("CARGO_PKG_VERSION")),
            tls,
            settings.services,
        );
        let metadata = hub.add_channel(json_channel(METADATA_TOPIC));
        lrbc::sync::lock(&hub.registry).metadata = Some(metadata);
        let status = hub.add_channel(json_channel(STATUS_TOPIC));
        let summary = hub.add_channel(json_channel(crate::summary::SUMMARY_TOPIC));
        let compressor = match settings.image_format {
            lrbc_recording::format::ImageEncoding::Raw => None,
            format => Some(
                compress::Compressor::start(format, Arc::clone(&hub))
                    .map_err(|e| listen_error(format!("cannot start the image encoder: {e}")))?,
            ),
        };
        let acceptor = hub
            .accept(listener, connection::run)
            .map_err(|e| listen_error(e.to_string()))?;
        let unix_now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        Ok(Self {
            hub,
            port,
            acceptor: Some(acceptor),
            channels: Vec::new(),
            kinds: Vec::new(),
            status,
            metadata,
            summary,
            pacer: pace::Pacer::default(),
            compressor,
            compressed: Vec::new(),
            frame_hz: settings.frame_hz,
            image_hz: settings.image_hz,
            unix_minus_monotonic_ns: unix_now - i128::from(lrbc::clock::monotonic_now_ns()),
            counts: ServeCounts::default(),
            dropped_before: (0, 0),
            due: Vec::new(),
        })
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        self.hub.peers().len()
    }

    /// Each client connected now, the number gone, and what those gone were sent.
    pub fn client_views(&self) -> (Vec<PeerView>, usize, ClientCounts) {
        self.hub.views()
    }

    pub fn counts(&self) -> ServeCounts {
        let mut c = self.counts;
        if let Some(k) = &self.compressor {
            let k = k.counts();
            c.messages += k.images;
            c.bytes += k.bytes;
            c.images += k.images;
            c.images_dropped += k.replaced;
            c.images_not_compressed = k.failed;
        }
        c
    }

    /// The served time of a monotonic time.
    pub fn unix_ns(&self, monotonic_ns: u64) -> u64 {
        (i128::from(monotonic_ns) + self.unix_minus_monotonic_ns).clamp(0, i128::from(u64::MAX))
            as u64
    }

    /// Advertises the prelude's channels not advertised yet (streams add channels).
    pub fn advertise(&mut self, prelude: &Prelude) -> Result<(), ServeError> {
        for (i, c) in prelude
            .channels
            .iter()
            .enumerate()
            .skip(self.channels.len())
        {
            let schema = c.schema.and_then(|s| prelude.schemas.get(s));
            let mut schema = schema.map(|s| (s.name.as_str(), s.encoding.as_str(), &s.data[..]));
            // Raw images go out compressed when asked: their channel says so.
            let compress = self.compressor.is_some()
                && schema.is_some_and(|s| s.0 == lrbc_recording::format::RAW_IMAGE_SCHEMA);
            if compress {
                schema = Some((
                    lrbc_recording::format::COMPRESSED_IMAGE_SCHEMA,
                    "flatbuffer",
                    lrbc::rpc::FOXGLOVE_COMPRESSED_IMAGE_BFBS,
                ));
            }
            let kind = match schema.map(|s| s.0) {
                Some(lrbc_recording::format::FRAME_SCHEMA) => ChannelKind::Frame,
                Some(
                    lrbc_recording::format::RAW_IMAGE_SCHEMA
                    | lrbc_recording::format::COMPRESSED_IMAGE_SCHEMA,
                ) => ChannelKind::Image,
                _ => ChannelKind::Other,
            };
            let id = self.hub.add_channel(ChannelAd {
                id: 0,
                topic: c.topic.clone(),
                encoding: c.message_encoding.clone(),
                schema_name: schema.map(|s| s.0.to_string()).unwrap_or_default(),
                schema_encoding: schema.map(|s| s.1.to_string()),
                schema: schema.map(|s| s.2.to_vec()).unwrap_or_default(),
            });
            match kind {
                ChannelKind::Frame => self.pacer.limit(i, self.frame_hz),
                ChannelKind::Image => self.pacer.limit(i, self.image_hz),
                ChannelKind::Other => {}
            }
            self.channels.push(id);
            self.kinds.push(kind);
            self.compressed.push(compress);
        }
        Ok(())
    }

    /// A new capture: every channel of the old one goes (clients are told), the new
    /// prelude's channels and metadata come, sent at `now` (by the clock of the messages' times, as for [`Server::publish`]).
    pub fn replace(&mut self, now: u64, prelude: &Prelude) -> Result<(), ServeError> {
        self.dropped_before = (self.counts.frames_dropped, self.counts.images_dropped);
        self.hub
            .remove_channels(&std::mem::take(&mut self.channels));
        self.kinds.clear();
        self.compressed.clear();
        self.pacer.clear();
        self.advertise(prelude)?;
        self.send_metadata(now, prelude);
        Ok(())
    }

    /// True when someone subscribes to a frame channel, or to an image channel.
    pub fn wants(&self) -> (bool, bool) {
        let peers = self.hub.peers();
        let any = |kind| {
            (self.kinds.iter().zip(&self.channels))
                .any(|(&k, &id)| k == kind && peers.iter().any(|p| p.subscribes(id)))
        };
        // The summaries are made from the frames.
        let summaries = peers.iter().any(|p| p.subscribes(self.summary));
        (
            summaries || any(ChannelKind::Frame),
            any(ChannelKind::Image),
        )
    }

    /// Sends the metadata records of `prelude`, with the served clock's, to every
    /// subscriber at `now` (by the clock of the messages' times, as for [`Server::publish`]) and to each client as it
    /// subscribes.
    pub fn send_metadata(&mut self, now: u64, prelude: &Prelude) {
        let clock = BTreeMap::from([(
            "unix_minus_monotonic_ns".to_string(),
            self.unix_minus_monotonic_ns.to_string(),
        )]);
        let records: Vec<Arc<[u8]>> = prelude
            .metadata
            .iter()
            .map(|(name, m)| (name.as_str(), m))
            .chain([(CLOCK_METADATA, &clock)])
            .map(|(name, m)| {
                Arc::from(
                    serde_json::json!({"name": name, "metadata": m})
                        .to_string()
                        .into_bytes(),
                )
            })
            .collect();
        let log_time = self.unix_ns(now);
        let mut registry = lrbc::sync::lock(&self.hub.registry);
        for p in self.hub.peers() {
            for r in &records {
                p.offer(self.metadata, Class::Reliable, log_time, r);
            }
        }
        registry.records = (log_time, records);
    }

    /// Sends `messages` (channels indexed as the prelude) to their subscribers, within
    /// the channels' limits; messages of a limited channel may wait for [`Server::tick`].
    /// `now` is by the clock of the messages' times (the monotonic one, unless `serve`
    /// was given another).
    pub fn publish(&mut self, now: u64, messages: impl IntoIterator<Item = Message>) {
        // The clients as of this batch: one that comes during it gets the next.
        let peers = self.hub.peers();
        let summaries = peers.iter().any(|p| p.subscribes(self.summary));
        for m in messages {
            if summaries && m.kind == Kind::Frame {
                self.send_summary(&peers, &m);
            }
            let id = self.channels.get(m.channel).copied();
            if !id.is_some_and(|id| peers.iter().any(|p| p.subscribes(id))) {
                self.counts.unsubscribed += 1;
                continue;
            }
            if let Some(m) = self.pacer.offer(now, m) {
                self.send(&peers, &m);
            }
        }
        self.send_due(now, &peers);
    }

    /// Sends the messages whose turn came.
    pub fn tick(&mut self, now: u64) {
        self.send_due(now, &self.hub.peers());
    }

    fn send_due(&mut self, now: u64, peers: &[Arc<peer::Peer>]) {
        let mut due = std::mem::take(&mut self.due);
        self.pacer.due(now, &mut due);
        for m in due.drain(..) {
            self.send(peers, &m);
        }
        self.due = due;
        let (mut frames, mut images) = self.dropped_before;
        for (i, k) in self.kinds.iter().enumerate() {
            match k {
                ChannelKind::Frame => frames += self.pacer.dropped(i),
                ChannelKind::Image => images += self.pacer.dropped(i),
                ChannelKind::Other => {}
            }
        }
        self.counts.frames_dropped = frames;
        self.counts.images_dropped = images;
    }

    fn send(&mut self, peers: &[Arc<peer::Peer>], m: &Message) {
        let Some(&id) = self.channels.get(m.channel) else {
            return;
        };
        let log_time = self.unix_ns(m.log_time);
        if let Some(k) =
            (self.compressor.as_ref()).filter(|_| self.compressed.get(m.channel) == Some(&true))
        {
            // Counted as sent once compressed (`counts`).
            k.put(id, log_time, Arc::clone(&m.data));
            return;
        }
        let class = class_of(m.kind);
        let mut sent = false;
        for p in peers {
            sent |= p.offer(id, class, log_time, &m.data);
        }
        if !sent {
            self.counts.unsubscribed += 1;
            return;
        }
        let c = &mut self.counts;
        c.messages += 1;
        c.bytes += m.data.len() as u64;
        match m.kind {
            Kind::Frame => c.frames += 1,
            Kind::Image => c.images += 1,
            _ => {}
        }
    }

    /// Sends the summary of the frame `m` to its subscribers.
    fn send_summary(&mut self, peers: &[Arc<peer::Peer>], m: &Message) {
        let Some(f) = lrbc_recording::format::RecFrame::decode(m.log_time, &m.data) else {
            return;
        };
        let data: Arc<[u8]> = Arc::from(crate::summary::FrameSummary::of(&f).encode());
        let log_time = self.unix_ns(m.log_time);
        let mut sent = false;
        for p in peers {
            sent |= p.offer(self.summary, Class::Series, log_time, &data);
        }
        if sent {
            self.counts.summaries += 1;
        }
    }

    /// Sends the run's status (once a second) on [`STATUS_TOPIC`], with the figures of
    /// the client it goes to under `"client"`, at `now` (by the clock of the messages' times, as for [`Server::publish`]).
    pub fn send_status(&mut self, now: u64, status: &serde_json::Value) {
        let log_time = self.unix_ns(now);
        for p in self.hub.peers() {
            let mut v = status.clone();
            v["client"] = serde_json::to_value(p.view()).unwrap_or_default();
            let data: Arc<[u8]> = Arc::from(v.to_string().into_bytes());
            p.offer(self.status, Class::Reliable, log_time, &data);
        }
    }

    /// Tells every client (Foxglove shows it among its problems): a status with `id`
    /// replaces the previous one with the same id.
    pub fn tell_clients(&self, id: &str, warning: bool, text: &str) {
        let level = if warning {
            protocol::WARNING
        } else {
            protocol::INFO
        };
        self.hub
            .broadcast_text(&protocol::status(level, text, Some(id)));
    }

    /// Stops listening and closes every connection, within about a second whatever
    /// the clients do.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(k) = self.compressor.as_mut() {
            k.stop();
        }
        self.hub.shutdown(STOP_WAIT);
        if let Some(a) = self.acceptor.take() {
            // Woken by the stop's own connection; should that not come through, the
            // thread is left to end with the process rather than hold up the stop.
            let deadline = std::time::Instant::now() + Duration::from_millis(500);
            while !a.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            if a.is_finished() {
                // Only waits for the thread's end: a panic in it was printed when it
                // happened.
                let _ = a.join();
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}
