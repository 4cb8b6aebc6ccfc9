//! A connection to a server of the Foxglove WebSocket protocol (`serve`, or any other):
//! blocking, on the caller's thread; it offers the subprotocol `foxglove.sdk.v1`. Plain
//! (`ws://`) or over TLS (`wss://`: the system's roots and those given to
//! [`trust_certificates`]).

use std::collections::BTreeMap;
use std::net::TcpStream;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};

use tungstenite::client::IntoClientRequest;
use tungstenite::protocol::WebSocket;
use tungstenite::{Message as WsMessage, http::HeaderValue};

use super::wire::{self, AdvertisedChannel, ServerMessage};
use crate::protocol::TlsError;

/// Why a connection failed or ended, as one line.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("{0:?} is not a ws://HOST:PORT or wss://HOST:PORT address")]
    Address(String),
    #[error("TLS to {addr}: {cause}")]
    Tls { addr: String, cause: String },
    #[error("cannot connect to {addr}: {cause}")]
    Connect { addr: String, cause: String },
    #[error("{addr} does not speak {protocol}: {cause}")]
    Handshake {
        addr: String,
        protocol: &'static str,
        cause: String,
    },
    #[error("the connection to {addr} ended: {cause}")]
    Closed { addr: String, cause: String },
    #[error(transparent)]
    Malformed(#[from] wire::Malformed),
    #[error("the server offers no service {0:?} (is it serving with --allow-control?)")]
    NoService(String),
}

/// `HOST:PORT` of a `ws://HOST:PORT` or `wss://HOST:PORT` address (the scheme may be
/// left out: `ws://`).
pub fn host_port(url: &str) -> Result<String, RemoteError> {
    parse(url).map(|(_, hp)| hp)
}

/// Whether the address asks for TLS, and its `HOST:PORT`.
fn parse(url: &str) -> Result<(bool, String), RemoteError> {
    let t = url.trim();
    let (tls, rest) = match (t.strip_prefix("wss://"), t.strip_prefix("ws://")) {
        (Some(r), _) => (true, r),
        (None, Some(r)) => (false, r),
        (None, None) => (false, t),
    };
    let rest = rest.trim_end_matches('/');
    let ok = rest
        .rsplit_once(':')
        .is_some_and(|(h, p)| !h.is_empty() && p.parse::<u16>().is_ok());
    if !ok || rest.contains('/') {
        return Err(RemoteError::Address(url.to_string()));
    }
    Ok((tls, rest.to_string()))
}

/// The address as the connection uses it: `ws://HOST:PORT` or `wss://HOST:PORT`.
pub fn normalize(url: &str) -> Result<String, RemoteError> {
    let (tls, hp) = parse(url)?;
    Ok(format!("{}://{hp}", if tls { "wss" } else { "ws" }))
}

/// Certificates trusted for `wss://` besides the system's (a server's self-signed one).
static EXTRA_ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();

/// Why certificates to trust were not taken, as one line.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("not PEM certificates: {0}")]
    NotPem(rustls::pki_types::pem::Error),
    #[error("no certificate in it")]
    NoCertificate,
    #[error("certificates were given already")]
    Again,
}

/// Trusts the certificates of a PEM file's bytes for `wss://` connections of this
/// process (once; a second call is refused). Returns how many there were.
pub fn trust_certificates(pem: &[u8]) -> Result<usize, TrustError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(TrustError::NotPem)?;
    if certs.is_empty() {
        return Err(TrustError::NoCertificate);
    }
    let n = certs.len();
    EXTRA_ROOTS.set(certs).map_err(|_| TrustError::Again)?;
    Ok(n)
}

/// The cryptography of TLS: ring's.
#[cfg(feature = "tls")]
fn provider() -> Result<Arc<rustls::crypto::CryptoProvider>, TlsError> {
    Ok(Arc::new(rustls::crypto::ring::default_provider()))
}

/// None in a build without the `tls` feature.
#[cfg(not(feature = "tls"))]
fn provider() -> Result<Arc<rustls::crypto::CryptoProvider>, TlsError> {
    Err(TlsError::NotBuilt)
}

/// The TLS settings of a client: the system's roots and the extra ones.
fn tls_config() -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_native_certs::load_native_certs().certs {
        // A system certificate rustls cannot use is left out, as a browser would.
        let _ = roots.add(c);
    }
    for c in EXTRA_ROOTS.get().into_iter().flatten() {
        roots.add(c.clone())?;
    }
    let provider = provider()?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// The bytes under the WebSocket: TCP, or TLS over it.
type Stream = crate::protocol::Stream<rustls::ClientConnection>;

/// One connection.
pub struct Connection {
    ws: WebSocket<Stream>,
    addr: String,
    /// The server's name and session, from its `serverInfo`.
    pub server_name: String,
    pub session_id: Option<String>,
    /// Channels advertised and not withdrawn, by id.
    pub channels: BTreeMap<u64, AdvertisedChannel>,
    /// Services advertised, by name.
    pub services: BTreeMap<String, u32>,
    /// Subscriptions: id to channel id.
    subscriptions: BTreeMap<u32, u64>,
    next_subscription: u32,
    next_call: u32,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("addr", &self.addr)
            .field("channels", &self.channels.len())
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// Connects to `url` (`ws://HOST:PORT` or `wss://HOST:PORT`) within `timeout`.
    pub fn connect(url: &str, timeout: Duration) -> Result<Self, RemoteError> {
        let (tls, addr) = parse(url)?;
        let connect_err = |cause: String| RemoteError::Connect {
            addr: addr.clone(),
            cause,
        };
        let sock = std::net::ToSocketAddrs::to_socket_addrs(&addr)
            .map_err(|e| connect_err(e.to_string()))?
            .next()
            .ok_or_else(|| connect_err("the name has no address".into()))?;
        let stream =
            TcpStream::connect_timeout(&sock, timeout).map_err(|e| connect_err(e.to_string()))?;
        // Without it small messages go a little later, no more.
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| connect_err(e.to_string()))?;
        let stream = if tls {
            let tls_err = |cause: String| RemoteError::Tls {
                addr: addr.clone(),
                cause,
            };
            let host = addr.rsplit_once(':').map_or(addr.as_str(), |(h, _)| h);
            let host = host.trim_start_matches('[').trim_end_matches(']');
            let name =
                ServerName::try_from(host.to_string()).map_err(|e| tls_err(e.to_string()))?;
            let conn = rustls::ClientConnection::new(
                tls_config().map_err(|e| tls_err(e.to_string()))?,
                name,
            )
            .map_err(|e| tls_err(e.to_string()))?;
            let mut s = rustls::StreamOwned::new(conn, stream);
            // The handshake now, so that a certificate refused is said as such.
            while s.conn.is_handshaking() {
                s.conn
                    .complete_io(&mut s.sock)
                    .map_err(|e| tls_err(e.to_string()))?;
            }
            Stream::Tls(Box::new(s))
        } else {
            Stream::Plain(stream)
        };
        let scheme = if tls { "wss" } else { "ws" };
        let mut request = format!("{scheme}://{addr}/")
            .into_client_request()
            .map_err(|e| connect_err(e.to_string()))?;
        request.headers_mut().insert(
            "Sec-WebSocket-Protocol",
            HeaderValue::from_static(crate::protocol::SUBPROTOCOL),
        );
        let (ws, _) = tungstenite::client(request, stream).map_err(|e| RemoteError::Handshake {
            addr: addr.clone(),
            protocol: crate::protocol::SUBPROTOCOL,
            cause: e.to_string(),
        })?;
        let mut c = Self {
            ws,
            addr,
            server_name: String::new(),
            session_id: None,
            channels: BTreeMap::new(),
            services: BTreeMap::new(),
            subscriptions: BTreeMap::new(),
            next_subscription: 1,
            next_call: 1,
        };
        // The server speaks first: its serverInfo.
        let deadline = Instant::now() + timeout;
        while c.server_name.is_empty() && Instant::now() < deadline {
            c.next(deadline.saturating_duration_since(Instant::now()))?;
        }
        Ok(c)
    }

    /// `HOST:PORT` of the server.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn closed(&self, cause: impl ToString) -> RemoteError {
        RemoteError::Closed {
            addr: self.addr.clone(),
            cause: cause.to_string(),
        }
    }

    /// The next message within `timeout` (None: none came), with the connection's
    /// tables (channels, services, server info) brought up to date.
    pub fn next(&mut self, timeout: Duration) -> Result<Option<ServerMessage>, RemoteError> {
        // It fails only for a zero duration, which the max() rules out.
        let _ = self
            .ws
            .get_ref()
            .tcp()
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))));
        let m = match self.ws.read() {
            Ok(m) => m,
            Err(tungstenite::Error::Io(e))
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(None);
            }
            Err(e) => return Err(self.closed(e)),
        };
        let parsed = match m {
            WsMessage::Text(t) => wire::parse_text(t.as_str())?,
            WsMessage::Binary(b) => wire::parse_binary(&b)?,
            WsMessage::Close(frame) => {
                return Err(
                    self.closed(frame.map_or("closed by the server".into(), |f| {
                        format!("closed by the server: {}", f.reason)
                    })),
                );
            }
            _ => return Ok(None),
        };
        match &parsed {
            ServerMessage::ServerInfo {
                name, session_id, ..
            } => {
                self.server_name = name.clone();
                self.session_id = session_id.clone();
            }
            ServerMessage::Advertise(channels) => {
                for c in channels {
                    self.channels.insert(c.id, c.clone());
                }
            }
            ServerMessage::Unadvertise(ids) => {
                for id in ids {
                    self.channels.remove(id);
                }
                self.subscriptions.retain(|_, c| !ids.contains(c));
            }
            ServerMessage::AdvertiseServices(services) => {
                for s in services {
                    self.services.insert(s.name.clone(), s.id);
                }
            }
            // The server sends an advertisement before it can take subscriptions to it
            // (foxglove 0.30): a subscription that came too soon is made again.
            ServerMessage::Status {
                level: 2, message, ..
            } => {
                let early = message
                    .strip_prefix("Unknown channel ID: ")
                    .and_then(|id| id.trim().parse::<u64>().ok())
                    .filter(|id| self.channels.contains_key(id));
                let pairs: Vec<(u32, u64)> = (self.subscriptions.iter())
                    .filter(|&(_, c)| Some(*c) == early)
                    .map(|(&s, &c)| (s, c))
                    .collect();
                if !pairs.is_empty() {
                    self.ws
                        .send(WsMessage::text(wire::subscribe(&pairs)))
                        .map_err(|e| self.closed(e))?;
                }
            }
            ServerMessage::UnadvertiseServices(ids) => {
                self.services.retain(|_, id| !ids.contains(id));
            }
            _ => {}
        }
        Ok(Some(parsed))
    }

    /// The channel of subscription `id`.
    pub fn channel_of(&self, subscription: u32) -> Option<&AdvertisedChannel> {
        self.channels.get(self.subscriptions.get(&subscription)?)
    }

    /// Subscribes to the channels with these ids; returns the subscription ids.
    pub fn subscribe(&mut self, channels: &[u64]) -> Result<Vec<u32>, RemoteError> {
        let pairs: Vec<(u32, u64)> = channels
            .iter()
            .map(|&c| {
                let id = self.next_subscription;
                self.next_subscription += 1;
                (id, c)
            })
            .collect();
        self.ws
            .send(WsMessage::text(wire::subscribe(&pairs)))
            .map_err(|e| self.closed(e))?;
        self.subscriptions.extend(pairs.iter().copied());
        Ok(pairs.into_iter().map(|(id, _)| id).collect())
    }

    /// Ends subscriptions.
    pub fn unsubscribe(&mut self, ids: &[u32]) -> Result<(), RemoteError> {
        self.ws
            .send(WsMessage::text(wire::unsubscribe(ids)))
            .map_err(|e| self.closed(e))?;
        for id in ids {
            self.subscriptions.remove(id);
        }
        Ok(())
    }

    /// Calls service `name` with a JSON request; returns the call id (the response
    /// comes as a [`ServerMessage::ServiceResponse`] or `ServiceCallFailure`).
    pub fn call(&mut self, name: &str, json: &[u8]) -> Result<u32, RemoteError> {
        let service = *self
            .services
            .get(name)
            .ok_or_else(|| RemoteError::NoService(name.to_string()))?;
        let call = self.next_call;
        self.next_call += 1;
        self.ws
            .send(WsMessage::binary(wire::service_call(
                service, call, "json", json,
            )))
            .map_err(|e| self.closed(e))?;
        Ok(call)
    }

    /// Sends raw text (tests of the server's answers to bad input).
    pub fn send_text(&mut self, text: &str) -> Result<(), RemoteError> {
        self.ws
            .send(WsMessage::text(text.to_string()))
            .map_err(|e| self.closed(e))
    }

    /// Sends raw bytes (tests of the server's answers to bad input).
    pub fn send_binary(&mut self, bytes: Vec<u8>) -> Result<(), RemoteError> {
        self.ws
            .send(WsMessage::binary(bytes))
            .map_err(|e| self.closed(e))
    }

    /// Closes the connection.
    pub fn close(mut self) {
        // The connection is ending: a goodbye that fails changes nothing.
        let _ = self.ws.close(None);
        let _ = self.ws.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_ws_host_port() {
        assert_eq!(
            host_port("ws://127.0.0.1:8765").ok().as_deref(),
            Some("127.0.0.1:8765")
        );
        assert_eq!(host_port("node:1/").ok().as_deref(), Some("node:1"));
        assert_eq!(host_port("wss://a:1").ok().as_deref(), Some("a:1"));
        assert_eq!(normalize("a:1").ok().as_deref(), Some("ws://a:1"));
        assert_eq!(normalize("wss://a:1/").ok().as_deref(), Some("wss://a:1"));
        for bad in ["ws://node", "http://a:1", "ws://a:1/path", ":1", "wss://a"] {
            assert!(host_port(bad).is_err(), "{bad}");
        }
    }
}
