//! Serving a run live over the Foxglove WebSocket protocol (subprotocol
//! `foxglove.sdk.v1`, through the `foxglove` crate): the channels, schemas and messages
//! of a recording, from the same [`Capture`](crate::record::Capture), as they happen.
//!
//! - Each channel of the capture's prelude is a channel of the server, with the same
//!   topic, encoding and schema; streams add channels as they show up, and a new capture
//!   (the engine restarted, the segment was replaced) re-advertises them all.
//! - The metadata records of a recording go on [`METADATA_TOPIC`], one JSON message per
//!   record (`{"name": …, "metadata": {…}}`), to each client as it subscribes and to
//!   every subscriber when they change; [`STATUS_TOPIC`] carries the run's state, rates
//!   and counts once a second.
//! - Times are Unix nanoseconds on the wire (a recording's are the machine's monotonic
//!   clock): `lrbc.clock` says the difference.
//! - Nothing is encoded for a channel nobody subscribes to; limited channels (frames,
//!   images) send the newest message at most at their rate ([`pace`]); each client has
//!   a bounded queue of its own, whose oldest messages go when it is full.

mod control;
mod log;
mod pace;

use std::collections::BTreeMap;
use std::sync::Arc;

use foxglove::websocket::service::Service;
use foxglove::websocket::{Capability, ChannelView, Client, ServerListener};
use foxglove::{ChannelBuilder, Context, PartialMetadata, RawChannel, Schema};

pub use control::{SERVICE_STATUS, SET_SERVICE, control_services};
pub use log::print_server_events;

use crate::record::{Kind, Message, Prelude};
use crate::sync::lock;

/// The topic of the metadata records.
pub const METADATA_TOPIC: &str = "/lrbc/metadata";
/// The topic of the run's state, rates and counts, once a second.
pub const STATUS_TOPIC: &str = "/lrbc/serve/status";
/// The metadata record that gives the served times' clock: `unix_minus_monotonic_ns`.
pub const CLOCK_METADATA: &str = "lrbc.clock";
/// The subprotocol served.
pub const SUBPROTOCOL: &str = "foxglove.sdk.v1";

/// Where and how to serve.
#[derive(Debug)]
pub struct Settings {
    pub host: String,
    pub port: u16,
    /// Frames a second at most on the frame channel (0: every frame).
    pub frame_hz: f64,
    /// Images a second at most on each image channel (0: every image).
    pub image_hz: f64,
    /// Messages a client's queue holds before its oldest go.
    pub backlog: usize,
    /// The services clients may call (none: control is not offered).
    pub services: Vec<Service>,
    /// TLS: a PEM certificate (chain) and its PKCS #8 private key (PEM); None: plain.
    pub tls: Option<(Vec<u8>, Vec<u8>)>,
}

/// Why a build without the `tls` feature cannot speak TLS.
pub const NO_TLS: &str = "this build has no TLS (built without the `tls` feature)";

/// Checks a PEM certificate chain and a PEM PKCS #8 private key before serving with
/// them; the error says which file is wrong and why.
pub fn check_tls(cert: &[u8], key: &[u8]) -> Result<(), String> {
    if cfg!(not(feature = "tls")) {
        return Err(NO_TLS.to_string());
    }
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
    let certs = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("--tls-cert: not a PEM certificate: {e}"))?;
    if certs.is_empty() {
        return Err("--tls-cert: no certificate in it".into());
    }
    PrivatePkcs8KeyDer::from_pem_slice(key).map_err(|e| {
        format!("--tls-key: no PEM PKCS #8 private key (\"BEGIN PRIVATE KEY\"): {e}")
    })?;
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
    /// Messages handed to the server with at least one subscriber.
    pub messages: u64,
    pub bytes: u64,
    pub frames: u64,
    pub images: u64,
    /// Frames replaced by a newer one before their turn came (`--max-hz`).
    pub frames_dropped: u64,
    /// Images replaced by a newer one before their turn came (`--image-hz`).
    pub images_dropped: u64,
    /// Messages not encoded because nobody subscribed to their channel.
    pub unsubscribed: u64,
}

/// Sends the metadata records to each client as it subscribes to them.
struct Listener {
    metadata: Arc<RawChannel>,
    /// The encoded records, with their log time.
    records: std::sync::Mutex<(u64, Vec<Vec<u8>>)>,
}

impl ServerListener for Listener {
    fn on_subscribe(&self, client: Client, channel: ChannelView<'_>) {
        if channel.topic() != METADATA_TOPIC {
            return;
        }
        let records = lock(&self.records);
        for r in &records.1 {
            let meta = PartialMetadata {
                log_time: Some(records.0),
            };
            self.metadata
                .log_with_meta_to_sink(r, meta, client.sink_id());
        }
    }
}

/// A running server of one run.
pub struct Server {
    ctx: Arc<Context>,
    handle: Option<foxglove::WebSocketServerHandle>,
    /// The server's channels, indexed as the prelude's.
    channels: Vec<Arc<RawChannel>>,
    kinds: Vec<ChannelKind>,
    status: Arc<RawChannel>,
    listener: Arc<Listener>,
    pacer: pace::Pacer,
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
            .field("channels", &self.channels.len())
            .field("counts", &self.counts)
            .finish_non_exhaustive()
    }
}

fn json_channel(ctx: &Arc<Context>, topic: &str) -> Result<Arc<RawChannel>, ServeError> {
    ChannelBuilder::new(topic)
        .message_encoding("json")
        .context(ctx)
        .build_raw()
        .map_err(|e| ServeError::Channel {
            topic: topic.into(),
            cause: e.to_string(),
        })
}

impl Server {
    /// Listens on `settings.host:settings.port` (port 0: any free port).
    pub fn start(settings: Settings) -> Result<Self, ServeError> {
        let ctx = Context::new();
        let listener = Arc::new(Listener {
            metadata: json_channel(&ctx, METADATA_TOPIC)?,
            records: std::sync::Mutex::default(),
        });
        let status = json_channel(&ctx, STATUS_TOPIC)?;
        let control = !settings.services.is_empty();
        let mut server = foxglove::WebSocketServer::new()
            .name(format!("lrbc-inspector {}", env!("CARGO_PKG_VERSION")))
            .bind(settings.host.clone(), settings.port)
            .message_backlog_size(settings.backlog.max(1))
            .listener(Arc::clone(&listener) as Arc<dyn ServerListener>)
            .context(&ctx);
        #[cfg(feature = "tls")]
        if let Some((cert, key)) = settings.tls {
            server = server.tls(foxglove::websocket::TlsIdentity { cert, key });
        }
        #[cfg(not(feature = "tls"))]
        if settings.tls.is_some() {
            return Err(ServeError::Listen {
                addr: format!("{}:{}", settings.host, settings.port),
                cause: NO_TLS.into(),
            });
        }
        if control {
            server = server
                .capabilities([Capability::Services])
                .supported_encodings(["json"])
                .services(settings.services);
        }
        let handle = server.start_blocking().map_err(|e| ServeError::Listen {
            addr: format!("{}:{}", settings.host, settings.port),
            cause: e.to_string(),
        })?;
        // Frames of a few envs are small messages: without this they would wait for the
        // client's delayed acknowledgement (tens of milliseconds).
        crate::platform::nodelay_on_listeners(handle.port());
        let unix_now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i128);
        Ok(Self {
            ctx,
            handle: Some(handle),
            channels: Vec::new(),
            kinds: Vec::new(),
            status,
            listener,
            pacer: pace::Pacer::default(),
            frame_hz: settings.frame_hz,
            image_hz: settings.image_hz,
            unix_minus_monotonic_ns: unix_now - i128::from(crate::clock::monotonic_now_ns()),
            counts: ServeCounts::default(),
            dropped_before: (0, 0),
            due: Vec::new(),
        })
    }

    /// The port listened on.
    pub fn port(&self) -> u16 {
        self.handle.as_ref().map_or(0, |h| h.port())
    }

    /// Clients connected now.
    pub fn clients(&self) -> usize {
        self.handle.as_ref().map_or(0, |h| h.client_count())
    }

    pub fn counts(&self) -> ServeCounts {
        self.counts
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
            let kind = match schema.map(|s| s.name.as_str()) {
                Some(crate::recording::FRAME_SCHEMA) => ChannelKind::Frame,
                Some(
                    crate::recording::RAW_IMAGE_SCHEMA | crate::recording::COMPRESSED_IMAGE_SCHEMA,
                ) => ChannelKind::Image,
                _ => ChannelKind::Other,
            };
            let mut builder =
                ChannelBuilder::new(c.topic.clone()).message_encoding(c.message_encoding.clone());
            if let Some(s) = schema {
                builder = builder.schema(Schema::new(
                    s.name.clone(),
                    s.encoding.clone(),
                    s.data.clone(),
                ));
            }
            let channel =
                builder
                    .context(&self.ctx)
                    .build_raw()
                    .map_err(|e| ServeError::Channel {
                        topic: c.topic.clone(),
                        cause: e.to_string(),
                    })?;
            match kind {
                ChannelKind::Frame => self.pacer.limit(i, self.frame_hz),
                ChannelKind::Image => self.pacer.limit(i, self.image_hz),
                ChannelKind::Other => {}
            }
            self.channels.push(channel);
            self.kinds.push(kind);
        }
        Ok(())
    }

    /// A new capture: every channel of the old one goes (clients are told), the new
    /// prelude's channels and metadata come.
    pub fn replace(&mut self, prelude: &Prelude) -> Result<(), ServeError> {
        self.dropped_before = (self.counts.frames_dropped, self.counts.images_dropped);
        for c in self.channels.drain(..) {
            c.close();
        }
        self.kinds.clear();
        self.pacer.clear();
        self.advertise(prelude)?;
        self.send_metadata(prelude);
        Ok(())
    }

    /// True when someone subscribes to the channel `channel` of the prelude.
    pub fn wanted(&self, channel: usize) -> bool {
        self.channels.get(channel).is_some_and(|c| c.has_sinks())
    }

    /// True when someone subscribes to a frame channel, or to an image channel.
    pub fn wants(&self) -> (bool, bool) {
        let any = |kind| {
            (self.kinds.iter().zip(&self.channels)).any(|(&k, c)| k == kind && c.has_sinks())
        };
        (any(ChannelKind::Frame), any(ChannelKind::Image))
    }

    /// Sends the metadata records of `prelude`, with the served clock's, to every
    /// subscriber now and to each client as it subscribes.
    pub fn send_metadata(&mut self, prelude: &Prelude) {
        let now = crate::clock::monotonic_now_ns();
        let clock = BTreeMap::from([(
            "unix_minus_monotonic_ns".to_string(),
            self.unix_minus_monotonic_ns.to_string(),
        )]);
        let records: Vec<Vec<u8>> = prelude
            .metadata
            .iter()
            .map(|(name, m)| (name.as_str(), m))
            .chain([(CLOCK_METADATA, &clock)])
            .map(|(name, m)| {
                serde_json::json!({"name": name, "metadata": m})
                    .to_string()
                    .into_bytes()
            })
            .collect();
        let log_time = self.unix_ns(now);
        for r in &records {
            self.listener.metadata.log_with_meta(
                r,
                PartialMetadata {
                    log_time: Some(log_time),
                },
            );
        }
        *lock(&self.listener.records) = (log_time, records);
    }

    /// Sends `messages` (channels indexed as the prelude) to their subscribers, within
    /// the channels' limits; messages of a limited channel may wait for [`Server::tick`].
    pub fn publish(&mut self, now: u64, messages: impl IntoIterator<Item = Message>) {
        for m in messages {
            if !self.wanted(m.channel) {
                self.counts.unsubscribed += 1;
                continue;
            }
            if let Some(m) = self.pacer.offer(now, m) {
                self.send(&m);
            }
        }
        self.tick(now);
    }

    /// Sends the messages whose turn came.
    pub fn tick(&mut self, now: u64) {
        let mut due = std::mem::take(&mut self.due);
        self.pacer.due(now, &mut due);
        for m in due.drain(..) {
            self.send(&m);
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

    fn send(&mut self, m: &Message) {
        let Some(channel) = self.channels.get(m.channel) else {
            return;
        };
        channel.log_with_meta(
            &m.data,
            PartialMetadata {
                log_time: Some(self.unix_ns(m.log_time)),
            },
        );
        let c = &mut self.counts;
        c.messages += 1;
        c.bytes += m.data.len() as u64;
        match m.kind {
            Kind::Frame => c.frames += 1,
            Kind::Image => c.images += 1,
            _ => {}
        }
    }

    /// Sends the run's status (once a second) on [`STATUS_TOPIC`].
    pub fn send_status(&mut self, status: &serde_json::Value) {
        let now = self.unix_ns(crate::clock::monotonic_now_ns());
        self.status.log_with_meta(
            status.to_string().as_bytes(),
            PartialMetadata {
                log_time: Some(now),
            },
        );
    }

    /// Tells every client (Foxglove shows it among its problems): a warning with `id`
    /// replaces the previous one with the same id.
    pub fn tell_clients(&self, id: &str, warning: bool, text: &str) {
        if let Some(h) = &self.handle {
            let status = if warning {
                foxglove::websocket::Status::warning(text)
            } else {
                foxglove::websocket::Status::info(text)
            };
            h.publish_status(status.with_id(id));
        }
    }

    /// Stops listening and closes every connection.
    pub fn stop(mut self) {
        if let Some(h) = self.handle.take() {
            h.stop().wait_blocking();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            h.stop().wait_blocking();
        }
    }
}
