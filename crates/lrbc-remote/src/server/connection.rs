//! One client's connection, on a thread of its own: the WebSocket handshake, what the
//! client asks (subscriptions, service calls), and the writing of its outbox no faster
//! than its link takes it ([`LinkBudget`]). Nothing here waits on the client: the
//! socket is non-blocking, so a client that stops reading, reads slowly or vanishes
//! holds up neither the other clients nor the server's stop. A client silent for
//! [`SILENT`] (no answer to pings) is dropped.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tungstenite::handshake::HandshakeError;
use tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tungstenite::protocol::{WebSocket, WebSocketConfig};
use tungstenite::{Error as WsError, Message as WsMessage};

use super::budget::LinkBudget;
use super::hub::Hub;
use super::log::{self, Repeats};
use super::outbox::{Class, Payload};
use super::peer::Peer;
use crate::protocol::{self, ClientMessage, Stream};
use lrbc::clock::monotonic_now_ns;
use lrbc::sync::lock;
use lrbc_live::text::plural;

/// A client that answers nothing (no pong, no message) for this long is dropped.
pub const SILENT: Duration = Duration::from_secs(15);
/// How often a client is pinged.
const PING_EVERY: Duration = Duration::from_secs(5);
/// The handshake's time limit.
const HANDSHAKE: Duration = Duration::from_secs(10);
/// The largest message a client may send (a subscription of many channels, a call).
const MAX_INCOMING: usize = 1 << 20;
/// How long the thread waits for new messages while there is nothing to write (what
/// the client sends is read at least this often).
const IDLE_WAIT: Duration = Duration::from_millis(20);
/// How long it waits while the link holds messages back.
const HELD_WAIT: Duration = Duration::from_millis(3);

type ServerStream = Stream<rustls::ServerConnection>;

/// The client at `addr` on `tcp`: handshake, then serve it until it goes or the server
/// stops; every end is one log line.
pub fn run(hub: &Arc<Hub>, tcp: TcpStream, addr: SocketAddr) {
    let who = format!("client {addr}");
    let mut ws = match handshake(hub, tcp) {
        Ok(ws) => ws,
        Err(why) => {
            log::line(format!("{who}: no WebSocket connection: {why}"));
            return;
        }
    };
    let peer = Arc::new(Peer::new(hub.next_peer_id(), addr.to_string()));
    hub.register(&peer);
    log::line(format!("{who} connected"));
    let why = serve(hub, &peer, &mut ws);
    let counts = {
        let mut s = lock(&peer.state);
        s.outbox.clear();
        s.outbox.counts
    };
    hub.unregister(&peer, &counts);
    log::line(format!(
        "{who} gone: {why}; {} frames delivered, {} conflated, {} dropped; {} images delivered; {} other messages; {:.1} MB",
        counts.frames.delivered,
        counts.frames.conflated,
        counts.frames.dropped,
        counts.images.delivered,
        counts.reliable,
        counts.bytes as f64 / 1e6
    ));
}

/// Why a client's WebSocket handshake did not happen.
#[derive(Debug, thiserror::Error)]
enum NoHandshake {
    #[error("{0}")]
    Socket(#[from] std::io::Error),
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("it closed the connection before the handshake")]
    ClosedEarly,
    #[error("{0}")]
    WebSocket(Box<WsError>),
    #[error("the server stopped")]
    Stopped,
    #[error("no handshake within {} s", HANDSHAKE.as_secs())]
    Late,
}

/// The client closed its connection: the end of its service.
#[derive(Debug, thiserror::Error)]
#[error("it closed the connection")]
struct ClientClosed;

/// The WebSocket handshake on a non-blocking socket, within [`HANDSHAKE`] and while the
/// server runs.
fn handshake(hub: &Hub, tcp: TcpStream) -> Result<WebSocket<ServerStream>, NoHandshake> {
    tcp.set_nonblocking(true)?;
    // Small messages go at once, not after the client's delayed acknowledgement.
    let _ = tcp.set_nodelay(true);
    let stream = match &hub.tls {
        Some(config) => {
            let conn = rustls::ServerConnection::new(Arc::clone(config))?;
            Stream::Tls(Box::new(rustls::StreamOwned::new(conn, tcp)))
        }
        None => Stream::Plain(tcp),
    };
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_INCOMING))
        .max_frame_size(Some(MAX_INCOMING))
        .write_buffer_size(0);
    let deadline = Instant::now() + HANDSHAKE;
    let mut result = tungstenite::accept_hdr_with_config(stream, choose_subprotocol, Some(config));
    loop {
        match result {
            Ok(ws) => return Ok(ws),
            Err(HandshakeError::Failure(WsError::Protocol(
                tungstenite::error::ProtocolError::HandshakeIncomplete,
            ))) => return Err(NoHandshake::ClosedEarly),
            Err(HandshakeError::Failure(e)) => return Err(NoHandshake::WebSocket(Box::new(e))),
            Err(HandshakeError::Interrupted(mid)) => {
                if hub.stopping() {
                    return Err(NoHandshake::Stopped);
                }
                if Instant::now() >= deadline {
                    return Err(NoHandshake::Late);
                }
                std::thread::sleep(Duration::from_millis(5));
                result = mid.handshake();
            }
        }
    }
}

/// Accepts a client that offers one of [`protocol::SUBPROTOCOLS`], answering with it.
#[allow(clippy::result_large_err)] // the signature tungstenite asks of a callback
fn choose_subprotocol(req: &Request, mut res: Response) -> Result<Response, ErrorResponse> {
    let offered = req
        .headers()
        .get_all("sec-websocket-protocol")
        .iter()
        .flat_map(|h| h.to_str().unwrap_or_default().split(','))
        .map(str::trim)
        .find(|p| protocol::SUBPROTOCOLS.contains(p));
    match offered {
        Some(p) => {
            if let Ok(v) = p.parse() {
                res.headers_mut().insert("sec-websocket-protocol", v);
            }
            Ok(res)
        }
        None => {
            let mut e = ErrorResponse::new(Some(format!(
                "this server speaks the WebSocket subprotocol {}",
                protocol::SUBPROTOCOL
            )));
            *e.status_mut() = tungstenite::http::StatusCode::BAD_REQUEST;
            Err(e)
        }
    }
}

fn would_block(e: &WsError) -> bool {
    matches!(e, WsError::Io(io) if matches!(io.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut))
}

fn ws_message(p: &Payload) -> WsMessage {
    match p {
        Payload::Text(t) => WsMessage::Text(t.clone().into()),
        Payload::Data { header, data } => {
            let mut b = Vec::with_capacity(header.len() + data.len());
            b.extend_from_slice(header);
            b.extend_from_slice(data);
            WsMessage::Binary(b.into())
        }
        Payload::Binary(b) => WsMessage::Binary(b.clone().into()),
    }
}

/// Serves the client until it goes or the server stops; why it ended.
fn serve(hub: &Arc<Hub>, peer: &Arc<Peer>, ws: &mut WebSocket<ServerStream>) -> String {
    let mut repeats = Repeats::new(format!("client {}", peer.addr));
    let mut budget = LinkBudget::default();
    let mut heard = Instant::now();
    let mut next_ping = heard + PING_EVERY;
    let mut next_view = heard + Duration::from_secs(1);
    // Where the socket gives no figures (Windows, macOS): the send buffer fitted to the
    // system's estimate of the link, while it gives one.
    let mut fitted: Option<u64> = None;
    let mut next_fit = Some(heard);
    // A message written that the socket has not taken whole.
    let mut unflushed = false;
    loop {
        if hub.stopping() {
            // The connection is ending: a goodbye that fails changes nothing.
            let _ = ws.close(None);
            return "the server stopped".into();
        }
        // What the client says.
        for _ in 0..64 {
            match ws.read() {
                Ok(m) => {
                    heard = Instant::now();
                    if let Err(why) = received(hub, peer, &mut repeats, m) {
                        return why.to_string();
                    }
                }
                Err(e) if would_block(&e) => break,
                Err(WsError::ConnectionClosed | WsError::AlreadyClosed) => {
                    return "it closed the connection".into();
                }
                Err(WsError::Protocol(
                    tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
                )) => return "its connection was reset (no closing handshake)".into(),
                Err(e) => return e.to_string(),
            }
        }
        if let Some(why) = lock(&peer.state).closing.clone() {
            // The connection is ending: a goodbye that fails changes nothing.
            let _ = ws.write(WsMessage::Text(
                protocol::status(protocol::ERROR, &format!("disconnected: {why}"), None).into(),
            ));
            // The connection is ending: a goodbye that fails changes nothing.
            let _ = ws.close(None);
            return format!("disconnected: {why}");
        }
        let now = Instant::now();
        if now.duration_since(heard) >= SILENT {
            return format!("no answer to pings for {} s", SILENT.as_secs());
        }
        if now >= next_ping {
            next_ping = now + PING_EVERY;
            match ws.write(WsMessage::Ping(Vec::new().into())) {
                Ok(()) => {}
                Err(e) if would_block(&e) => unflushed = true,
                Err(e) => return e.to_string(),
            }
        }
        // What the client is sent.
        let mut link = lrbc_platform::tcp_link(ws.get_ref().tcp());
        if let Some(l) = &link {
            budget.sample(monotonic_now_ns(), l);
        } else if next_fit.is_some_and(|t| now >= t) {
            fitted = lrbc_platform::fit_send_buffer(ws.get_ref().tcp(), super::budget::MIN_BUDGET);
            // Asked again as the link changes; not again where the system never says.
            next_fit = fitted.map(|_| now + Duration::from_nanos(super::budget::SAMPLE_NS));
        }
        if unflushed {
            match ws.flush() {
                Ok(()) => unflushed = false,
                Err(e) if would_block(&e) => {}
                Err(e) => return e.to_string(),
            }
        }
        let mut held = unflushed;
        while !unflushed {
            if link.as_ref().is_some_and(|l| !budget.allows(l)) {
                held = true;
                break;
            }
            let Some(out) = lock(&peer.state).outbox.pop() else {
                break;
            };
            match ws.write(ws_message(&out.payload)) {
                Ok(()) => {}
                // Buffered: it goes with the next flush.
                Err(e) if would_block(&e) => unflushed = true,
                Err(e) => return e.to_string(),
            }
            lock(&peer.state).outbox.delivered(&out);
            if !unflushed {
                match ws.flush() {
                    Ok(()) => {}
                    Err(e) if would_block(&e) => unflushed = true,
                    Err(e) => return e.to_string(),
                }
            }
            link = lrbc_platform::tcp_link(ws.get_ref().tcp());
        }
        let mut s = lock(&peer.state);
        let waiting = !s.outbox.is_empty();
        if held && waiting {
            budget.held_back();
            s.outbox.collapse();
        }
        if now >= next_view {
            next_view = now + Duration::from_secs(1);
            s.view.link_bytes_per_s = link.map(|_| budget.delivered());
            s.view.queued_bytes = link.map(|l| l.queued);
            s.view.budget_bytes = link.map(|l| budget.bytes(&l)).or(fitted);
            drop(s);
            for l in repeats.tick(monotonic_now_ns()) {
                log::line(l);
            }
            s = lock(&peer.state);
        }
        if held || unflushed {
            drop(s);
            std::thread::sleep(HELD_WAIT);
        } else if !waiting && s.closing.is_none() && !hub.stopping() {
            // Woken or timed out, the loop looks again.
            let _ = peer.wake.wait_timeout(s, IDLE_WAIT);
        }
    }
}

/// Handles what the client sent; an error ends the connection.
fn received(
    hub: &Arc<Hub>,
    peer: &Arc<Peer>,
    repeats: &mut Repeats,
    m: WsMessage,
) -> Result<(), ClientClosed> {
    let parsed = match &m {
        WsMessage::Text(t) => protocol::parse_client_text(t.as_str()),
        WsMessage::Binary(b) => protocol::parse_client_binary(b),
        WsMessage::Close(_) => return Err(ClientClosed),
        // Pings are answered by tungstenite; a pong is an answer, already counted.
        _ => return Ok(()),
    };
    let now = monotonic_now_ns();
    let mut complain = |kind: &'static str, text: String| {
        if let Some(line) = repeats.note(now, kind, &text) {
            log::line(line);
        }
        peer.push_text(protocol::status(protocol::ERROR, &text, None));
    };
    match parsed {
        Err(why) => complain("malformed messages", format!("malformed message: {why}")),
        Ok(ClientMessage::Subscribe(pairs)) => {
            let unknown = subscribe(hub, peer, &pairs);
            if !unknown.is_empty() {
                let shown: Vec<String> = unknown.iter().take(5).map(u64::to_string).collect();
                complain(
                    "subscriptions to unknown channels",
                    format!(
                        "subscribe: {} unknown channel{} ({}{})",
                        unknown.len(),
                        plural(unknown.len()),
                        shown.join(", "),
                        if unknown.len() > 5 { ", …" } else { "" }
                    ),
                );
            }
        }
        Ok(ClientMessage::Unsubscribe(ids)) => {
            let mut s = lock(&peer.state);
            let gone: Vec<u64> = (s.subs.iter())
                .filter(|(_, sub)| ids.contains(sub))
                .map(|(c, _)| *c)
                .collect();
            for c in gone {
                s.subs.remove(&c);
                s.outbox.forget(c);
            }
        }
        Ok(ClientMessage::ServiceCall {
            service,
            call_id,
            encoding,
            payload,
        }) => {
            if let Err(why) = hub.call(peer, service, call_id, &encoding, payload) {
                peer.push_text(protocol::service_call_failure(
                    service,
                    call_id,
                    &why.to_string(),
                ));
            }
        }
        Ok(ClientMessage::Unsupported(op)) => complain(
            "unsupported operations",
            format!("this server does not support {op}"),
        ),
    }
    Ok(())
}

/// Subscribes the client; the channels that do not exist.
fn subscribe(hub: &Hub, peer: &Arc<Peer>, pairs: &[(u32, u64)]) -> Vec<u64> {
    let registry = lock(&hub.registry);
    let mut unknown = Vec::new();
    let mut metadata = false;
    {
        let mut s = lock(&peer.state);
        for &(sub, channel) in pairs {
            if !registry.channels.contains_key(&channel) {
                unknown.push(channel);
                continue;
            }
            // A subscription id used again moves to the new channel.
            s.subs.retain(|_, v| *v != sub);
            s.subs.insert(channel, sub);
            metadata |= Some(channel) == registry.metadata;
        }
    }
    if metadata && let Some(channel) = registry.metadata {
        for r in &registry.records.1 {
            peer.offer(channel, Class::Reliable, registry.records.0, r);
        }
    }
    unknown
}
