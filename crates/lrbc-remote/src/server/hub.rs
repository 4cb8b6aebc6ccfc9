//! What the server's threads share: the channels and the metadata records, the
//! connected clients ([`Peer`]), the services; the thread that accepts connections and
//! the one that runs service calls.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::log::{self, Repeats};
use super::outbox::ClientCounts;
use super::peer::{Peer, PeerView};
use crate::protocol::{self, ChannelAd, ServiceAd};
use lrbc::sync::lock;

/// Connections at once (handshaking or connected) at most; more are closed at once.
pub const MAX_CONNECTIONS: usize = 256;
/// Service calls waiting at most; more are refused as busy.
const CALLS_WAITING: usize = 16;

/// What serves one accepted client on its thread, until it goes or the server stops
/// (the connection's `run`).
pub type Serve = fn(&Arc<Hub>, std::net::TcpStream, std::net::SocketAddr);

/// Why a service call failed: the handler's own error, whose message the client gets.
pub type HandlerError = Box<dyn std::error::Error + Send + Sync>;

/// A service's handler: the request's JSON to the response's JSON, or why not.
pub type Handler = Arc<dyn Fn(&[u8]) -> Result<Vec<u8>, HandlerError> + Send + Sync>;

/// Why a client's service call is not taken, as the line the client gets.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallRefused {
    #[error("this server does not support services (it serves control with --allow-control)")]
    NoServices,
    #[error("no service {0}")]
    NoSuchService(u32),
    #[error("requests are json, not {0:?}")]
    Encoding(String),
    #[error("the server is stopping")]
    Stopping,
    #[error("{CALLS_WAITING} calls wait already; call again later")]
    Busy,
}

/// A service clients may call, with JSON requests and responses.
#[derive(Clone)]
pub struct Service {
    pub name: String,
    /// The service's type name.
    pub kind: String,
    /// Schema name and JSON schema of the request.
    pub request: (String, String),
    /// Schema name and JSON schema of the response.
    pub response: (String, String),
    pub handler: Handler,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The channels advertised and the metadata records.
#[derive(Debug, Default)]
pub struct Registry {
    pub channels: BTreeMap<u64, ChannelAd>,
    /// The channel of the metadata records.
    pub metadata: Option<u64>,
    /// The records, encoded, with their log time.
    pub records: (u64, Vec<Arc<[u8]>>),
    next_channel: u64,
}

struct Call {
    peer: Arc<Peer>,
    service: u32,
    call_id: u32,
    payload: Vec<u8>,
}

/// The server's shared state.
pub struct Hub {
    stop: AtomicBool,
    pub name: String,
    pub session_id: String,
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub registry: Mutex<Registry>,
    peers: Mutex<Vec<Arc<Peer>>>,
    /// Clients gone, and what they were sent.
    gone: Mutex<(usize, ClientCounts)>,
    services: Vec<(ServiceAd, Handler)>,
    calls: Mutex<Option<crossbeam_channel::Sender<Call>>>,
    next_peer: AtomicU64,
    /// Connections with a thread now.
    connections: AtomicUsize,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// The address listened on (for the stop to wake the accepting thread).
    listening: Mutex<Option<std::net::SocketAddr>>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Hub {
    pub fn new(
        name: String,
        tls: Option<Arc<rustls::ServerConfig>>,
        services: Vec<Service>,
    ) -> Arc<Self> {
        let services: Vec<(ServiceAd, Handler)> = (services.into_iter().enumerate())
            .map(|(i, s)| {
                let ad = ServiceAd {
                    id: i as u32 + 1,
                    name: s.name,
                    kind: s.kind,
                    request: s.request,
                    response: s.response,
                };
                (ad, s.handler)
            })
            .collect();
        let session_id = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
            .to_string();
        let hub = Arc::new(Self {
            stop: AtomicBool::new(false),
            name,
            session_id,
            tls,
            registry: Mutex::default(),
            peers: Mutex::default(),
            gone: Mutex::default(),
            services,
            calls: Mutex::new(None),
            next_peer: AtomicU64::new(1),
            connections: AtomicUsize::new(0),
            threads: Mutex::default(),
            listening: Mutex::new(None),
        });
        if !hub.services.is_empty() {
            let (tx, rx) = crossbeam_channel::bounded::<Call>(CALLS_WAITING);
            let h = Arc::clone(&hub);
            let started = std::thread::Builder::new()
                .name("serve-calls".into())
                .spawn(move || {
                    for call in rx {
                        h.answer(call);
                    }
                });
            if started.is_ok() {
                *lock(&hub.calls) = Some(tx);
            }
        }
        hub
    }

    pub fn stopping(&self) -> bool {
        // Relaxed: a flag with no data behind it.
        self.stop.load(Ordering::Relaxed)
    }

    pub fn next_peer_id(&self) -> u64 {
        // Relaxed: a unique number, nothing ordered by it.
        self.next_peer.fetch_add(1, Ordering::Relaxed)
    }

    pub fn peers(&self) -> Vec<Arc<Peer>> {
        lock(&self.peers).clone()
    }

    /// Clients connected now, the figures of each, and the sum of those gone.
    pub fn views(&self) -> (Vec<PeerView>, usize, ClientCounts) {
        let views = self.peers().iter().map(|p| p.view()).collect();
        let gone = *lock(&self.gone);
        (views, gone.0, gone.1)
    }

    /// A client that finished its handshake: it is told who the server is, its
    /// channels and services, and then gets what is sent from now on.
    pub fn register(&self, peer: &Arc<Peer>) {
        // The registry's lock is held until the client is in the list, so that it
        // misses no channel advertised or withdrawn meanwhile.
        let registry = lock(&self.registry);
        let capabilities: &[&str] = if self.services.is_empty() {
            &[]
        } else {
            &[protocol::CAPABILITY_SERVICES]
        };
        peer.push_text(protocol::server_info(
            &self.name,
            capabilities,
            &self.session_id,
        ));
        if !registry.channels.is_empty() {
            peer.push_text(protocol::advertise(registry.channels.values()));
        }
        if !self.services.is_empty() {
            let ads: Vec<ServiceAd> = self.services.iter().map(|s| s.0.clone()).collect();
            peer.push_text(protocol::advertise_services(&ads));
        }
        lock(&self.peers).push(Arc::clone(peer));
    }

    pub fn unregister(&self, peer: &Arc<Peer>, counts: &ClientCounts) {
        lock(&self.peers).retain(|p| p.id != peer.id);
        let mut gone = lock(&self.gone);
        gone.0 += 1;
        gone.1.add(counts);
    }

    /// Advertises a channel to every client; its id.
    pub fn add_channel(&self, mut ad: ChannelAd) -> u64 {
        let mut registry = lock(&self.registry);
        registry.next_channel += 1;
        ad.id = registry.next_channel;
        let text = protocol::advertise([&ad]);
        registry.channels.insert(ad.id, ad);
        for p in lock(&self.peers).iter() {
            p.push_text(text.clone());
        }
        registry.next_channel
    }

    /// Withdraws channels from every client.
    pub fn remove_channels(&self, ids: &[u64]) {
        if ids.is_empty() {
            return;
        }
        let mut registry = lock(&self.registry);
        for id in ids {
            registry.channels.remove(id);
        }
        let text = protocol::unadvertise(ids);
        for p in lock(&self.peers).iter() {
            p.forget(ids);
            p.push_text(text.clone());
        }
    }

    /// Sends a text message to every client.
    pub fn broadcast_text(&self, text: &str) {
        for p in lock(&self.peers).iter() {
            p.push_text(text.to_string());
        }
    }

    /// A client's service call, queued for the calls' thread; why not, if it cannot be.
    pub fn call(
        &self,
        peer: &Arc<Peer>,
        service: u32,
        call_id: u32,
        encoding: &str,
        payload: Vec<u8>,
    ) -> Result<(), CallRefused> {
        if self.services.is_empty() {
            return Err(CallRefused::NoServices);
        }
        if !self.services.iter().any(|s| s.0.id == service) {
            return Err(CallRefused::NoSuchService(service));
        }
        if encoding != "json" {
            return Err(CallRefused::Encoding(encoding.into()));
        }
        let calls = lock(&self.calls);
        let tx = calls.as_ref().ok_or(CallRefused::Stopping)?;
        tx.try_send(Call {
            peer: Arc::clone(peer),
            service,
            call_id,
            payload,
        })
        .map_err(|_| CallRefused::Busy)
    }

    fn answer(&self, call: Call) {
        let Some((_, handler)) = self.services.iter().find(|s| s.0.id == call.service) else {
            return;
        };
        let text = match handler(&call.payload) {
            Ok(response) => {
                call.peer.push(
                    0,
                    super::outbox::Out {
                        class: super::outbox::Class::Reliable,
                        payload: super::outbox::Payload::Binary(protocol::service_bytes(
                            protocol::OP_SERVICE_RESPONSE,
                            call.service,
                            call.call_id,
                            "json",
                            &response,
                        )),
                    },
                );
                return;
            }
            Err(why) => {
                protocol::service_call_failure(call.service, call.call_id, &why.to_string())
            }
        };
        call.peer.push_text(text);
    }

    /// Accepts connections on `listener` until the server stops, each served by `serve`
    /// on a thread of its own. The stop wakes it with a connection of its own
    /// ([`Hub::shutdown`]).
    pub fn accept(
        self: &Arc<Self>,
        listener: TcpListener,
        serve: Serve,
    ) -> std::io::Result<JoinHandle<()>> {
        *lock(&self.listening) = listener.local_addr().ok();
        let hub = Arc::clone(self);
        std::thread::Builder::new()
            .name("serve-accept".into())
            .spawn(move || {
                let mut refused = Repeats::new("connections");
                loop {
                    let accepted = listener.accept();
                    if hub.stopping() {
                        return;
                    }
                    match accepted {
                        Ok((tcp, addr)) => hub.start_connection(tcp, addr, serve, &mut refused),
                        Err(e) => {
                            let now = lrbc::clock::monotonic_now_ns();
                            if let Some(l) = refused.note(now, "accept errors", &e.to_string()) {
                                log::line(l);
                            }
                            // (Out of descriptors, say: a moment for some to close.)
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                }
            })
    }

    fn start_connection(
        self: &Arc<Self>,
        tcp: std::net::TcpStream,
        addr: std::net::SocketAddr,
        serve: Serve,
        refused: &mut Repeats,
    ) {
        // Relaxed: a count compared with a limit; nothing ordered by it.
        if self.connections.load(Ordering::Relaxed) >= MAX_CONNECTIONS {
            let now = lrbc::clock::monotonic_now_ns();
            let text = format!("{addr} refused: {MAX_CONNECTIONS} connections already");
            if let Some(l) = refused.note(now, "connections refused", &text) {
                log::line(l);
            }
            return;
        }
        self.connections.fetch_add(1, Ordering::Relaxed);
        let hub = Arc::clone(self);
        let started = std::thread::Builder::new()
            .name("serve-client".into())
            .spawn(move || {
                serve(&hub, tcp, addr);
                hub.connections.fetch_sub(1, Ordering::Relaxed);
            });
        let mut threads = lock(&self.threads);
        threads.retain(|t| !t.is_finished());
        match started {
            Ok(t) => threads.push(t),
            Err(e) => {
                self.connections.fetch_sub(1, Ordering::Relaxed);
                log::line(format!("client {addr}: no thread for it: {e}"));
            }
        }
    }

    /// Stops accepting and serving; waits up to `timeout` for the clients' threads.
    pub fn shutdown(&self, timeout: Duration) {
        // Relaxed: a flag with no data behind it; the threads look at it each turn.
        self.stop.store(true, Ordering::Relaxed);
        // The accepting thread waits in accept: a connection wakes it to see the flag.
        if let Some(mut addr) = *lock(&self.listening) {
            if addr.ip().is_unspecified() {
                addr.set_ip(match addr {
                    std::net::SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    std::net::SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            // Wakes the acceptor's blocking accept; a connect that fails finds it gone
            // already.
            let _ = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200));
        }
        lock(&self.calls).take();
        for p in self.peers() {
            p.wake();
        }
        let deadline = Instant::now() + timeout;
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            if t.is_finished() {
                // Only waits for the thread's end: a panic in it was printed when it
                // happened.
                let _ = t.join();
            }
        }
    }
}
