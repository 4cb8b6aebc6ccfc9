//! The Foxglove WebSocket protocol as the server speaks it: the subprotocols it accepts,
//! the JSON text messages it sends, the binary layouts (little-endian) both sides use,
//! and what a client may send. The one place of the protocol's names and opcodes: the
//! viewer's side (`view::wire`) takes them from here.

use std::io::{Read, Write};
use std::net::TcpStream;

use base64::Engine as _;
use serde_json::json;

/// The topic of the metadata records.
pub const METADATA_TOPIC: &str = "/lrbc/metadata";
/// The topic of the run's state, rates and counts, once a second.
pub const STATUS_TOPIC: &str = "/lrbc/serve/status";
/// The metadata record that gives the served times' clock: `unix_minus_monotonic_ns`.
pub const CLOCK_METADATA: &str = "lrbc.clock";
/// Why a build without the `tls` feature cannot speak TLS.
pub const NO_TLS: &str = "this build has no TLS (built without the `tls` feature)";

/// TLS settings that could not be made, as one line.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{NO_TLS}")]
    NotBuilt,
    #[error("--tls-cert: not a PEM certificate: {0}")]
    NotCertificate(rustls::pki_types::pem::Error),
    #[error("--tls-cert: no certificate in it")]
    NoCertificate,
    #[error("--tls-key: no PEM PKCS #8 private key (\"BEGIN PRIVATE KEY\"): {0}")]
    NoKey(rustls::pki_types::pem::Error),
    /// The certificate (chain), read when serving.
    #[error("--tls-cert: {0}")]
    Cert(rustls::pki_types::pem::Error),
    /// The private key, read when serving.
    #[error("--tls-key: {0}")]
    Key(rustls::pki_types::pem::Error),
    #[error(transparent)]
    Rustls(#[from] rustls::Error),
}
/// `{"service": "camera", "enabled": true}`: toggles an engine service.
pub const SET_SERVICE: &str = "/lrbc/control/set_service";
/// `{}`: every engine service's status.
pub const SERVICE_STATUS: &str = "/lrbc/control/service_status";

/// The bytes under the WebSocket: TCP, or TLS over it (`C`: rustls' server or client
/// connection).
pub enum Stream<C> {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<C, TcpStream>>),
}

impl<C> std::fmt::Debug for Stream<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Self::Plain(_) => "Plain",
            Self::Tls(_) => "Tls",
        };
        f.debug_tuple(kind).field(self.tcp()).finish()
    }
}

impl<C> Stream<C> {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Self::Plain(s) => s,
            Self::Tls(s) => &s.sock,
        }
    }
}

impl<C> Read for Stream<C>
where
    rustls::StreamOwned<C, TcpStream>: Read,
{
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(s) => s.read(buf),
            Self::Tls(s) => s.read(buf),
        }
    }
}

impl<C> Write for Stream<C>
where
    rustls::StreamOwned<C, TcpStream>: Write,
{
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(s) => s.write(buf),
            Self::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Self::Plain(s) => s.flush(),
            Self::Tls(s) => s.flush(),
        }
    }
}

/// The subprotocol served (and offered by this tool's viewer).
pub const SUBPROTOCOL: &str = "foxglove.sdk.v1";
/// The subprotocols accepted from a client: the SDK's name, and the protocol's older name
/// (the same messages).
pub const SUBPROTOCOLS: [&str; 2] = [SUBPROTOCOL, "foxglove.websocket.v1"];

/// Binary opcode of a message on a subscription (server to client).
pub const OP_MESSAGE_DATA: u8 = 1;
/// Binary opcode of the server's time (server to client).
pub const OP_TIME: u8 = 2;
/// Binary opcode of a service call's response (server to client).
pub const OP_SERVICE_RESPONSE: u8 = 3;
/// Binary opcode of a service call (client to server).
pub const OP_SERVICE_CALL: u8 = 2;

/// The capability of a server that offers services.
pub const CAPABILITY_SERVICES: &str = "services";

/// Status levels.
pub const INFO: u8 = 0;
pub const WARNING: u8 = 1;
pub const ERROR: u8 = 2;

/// A channel as advertised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChannelAd {
    pub id: u64,
    pub topic: String,
    pub encoding: String,
    pub schema_name: String,
    pub schema_encoding: Option<String>,
    pub schema: Vec<u8>,
}

/// Binary schema encodings (`protobuf`, `flatbuffer`) travel as base64.
pub fn is_binary_schema(schema_encoding: Option<&str>) -> bool {
    matches!(schema_encoding, Some("protobuf" | "flatbuffer"))
}

impl ChannelAd {
    fn to_json(&self) -> serde_json::Value {
        let schema = if is_binary_schema(self.schema_encoding.as_deref()) {
            base64::engine::general_purpose::STANDARD.encode(&self.schema)
        } else {
            String::from_utf8_lossy(&self.schema).into_owned()
        };
        let mut v = json!({
            "id": self.id,
            "topic": self.topic,
            "encoding": self.encoding,
            "schemaName": self.schema_name,
            "schema": schema,
        });
        if let Some(e) = &self.schema_encoding {
            v["schemaEncoding"] = json!(e);
        }
        v
    }
}

/// A service as advertised: JSON requests and responses with JSON schemas.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServiceAd {
    pub id: u32,
    pub name: String,
    pub kind: String,
    /// Schema name and JSON schema of the request.
    pub request: (String, String),
    /// Schema name and JSON schema of the response.
    pub response: (String, String),
}

pub fn server_info(name: &str, capabilities: &[&str], session_id: &str) -> String {
    let encodings: &[&str] = if capabilities.contains(&CAPABILITY_SERVICES) {
        &["json"]
    } else {
        &[]
    };
    json!({
        "op": "serverInfo",
        "name": name,
        "capabilities": capabilities,
        "supportedEncodings": encodings,
        "metadata": {},
        "sessionId": session_id,
    })
    .to_string()
}

pub fn advertise<'a>(channels: impl IntoIterator<Item = &'a ChannelAd>) -> String {
    let channels: Vec<_> = channels.into_iter().map(ChannelAd::to_json).collect();
    json!({"op": "advertise", "channels": channels}).to_string()
}

pub fn unadvertise(ids: &[u64]) -> String {
    json!({"op": "unadvertise", "channelIds": ids}).to_string()
}

pub fn status(level: u8, message: &str, id: Option<&str>) -> String {
    let mut v = json!({"op": "status", "level": level, "message": message});
    if let Some(id) = id {
        v["id"] = json!(id);
    }
    v.to_string()
}

pub fn advertise_services(services: &[ServiceAd]) -> String {
    let part = |(name, schema): &(String, String)| json!({"encoding": "json", "schemaName": name, "schemaEncoding": "jsonschema", "schema": schema});
    let services: Vec<_> = services
        .iter()
        .map(|s| {
            json!({
                "id": s.id,
                "name": s.name,
                "type": s.kind,
                "request": part(&s.request),
                "response": part(&s.response),
            })
        })
        .collect();
    json!({"op": "advertiseServices", "services": services}).to_string()
}

pub fn service_call_failure(service: u32, call_id: u32, message: &str) -> String {
    json!({"op": "serviceCallFailure", "serviceId": service, "callId": call_id, "message": message})
        .to_string()
}

/// The bytes before a message's data on subscription `subscription`.
pub fn message_data_header(subscription: u32, log_time: u64) -> [u8; 13] {
    let mut h = [0; 13];
    h[0] = OP_MESSAGE_DATA;
    h[1..5].copy_from_slice(&subscription.to_le_bytes());
    h[5..13].copy_from_slice(&log_time.to_le_bytes());
    h
}

/// A service call or its response: `op`, service, call, encoding, payload.
pub fn service_bytes(
    op: u8,
    service: u32,
    call_id: u32,
    encoding: &str,
    payload: &[u8],
) -> Vec<u8> {
    let mut b = Vec::with_capacity(13 + encoding.len() + payload.len());
    b.push(op);
    b.extend_from_slice(&service.to_le_bytes());
    b.extend_from_slice(&call_id.to_le_bytes());
    b.extend_from_slice(&(encoding.len() as u32).to_le_bytes());
    b.extend_from_slice(encoding.as_bytes());
    b.extend_from_slice(payload);
    b
}

/// What a client said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientMessage {
    /// (subscription id, channel id) pairs.
    Subscribe(Vec<(u32, u64)>),
    Unsubscribe(Vec<u32>),
    ServiceCall {
        service: u32,
        call_id: u32,
        encoding: String,
        payload: Vec<u8>,
    },
    /// An operation this server does not offer (its name).
    Unsupported(String),
}

/// What is wrong with a client's message, in a few words.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BadClientMessage {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("a text message without \"op\"")]
    NoOp,
    #[error("{op} without {field}")]
    Missing { op: String, field: &'static str },
    /// A field of an operation that does not read.
    #[error("{op}: {why}")]
    Field { op: &'static str, why: String },
    #[error("a service call of {0} bytes is too short")]
    ShortCall(usize),
    #[error("an empty binary message")]
    Empty,
}

/// Parses a client's text message.
pub fn parse_client_text(text: &str) -> Result<ClientMessage, BadClientMessage> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Sub {
        id: u32,
        channel_id: u64,
    }
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| BadClientMessage::NotJson(e.to_string()))?;
    let op = v["op"].as_str().ok_or(BadClientMessage::NoOp)?;
    let field = |field: &'static str| {
        v.get(field)
            .cloned()
            .ok_or_else(|| BadClientMessage::Missing {
                op: op.into(),
                field,
            })
    };
    let bad = |op: &'static str| {
        move |e: serde_json::Error| BadClientMessage::Field {
            op,
            why: e.to_string(),
        }
    };
    Ok(match op {
        "subscribe" => {
            let subs: Vec<Sub> =
                serde_json::from_value(field("subscriptions")?).map_err(bad("subscribe"))?;
            ClientMessage::Subscribe(subs.into_iter().map(|s| (s.id, s.channel_id)).collect())
        }
        "unsubscribe" => ClientMessage::Unsubscribe(
            serde_json::from_value(field("subscriptionIds")?).map_err(bad("unsubscribe"))?,
        ),
        other => ClientMessage::Unsupported(other.chars().take(64).collect()),
    })
}

/// The little-endian u32 at `at`, if `b` holds it.
pub fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(
        b.get(at..at.checked_add(4)?)?.try_into().ok()?,
    ))
}

/// The little-endian u64 at `at`, if `b` holds it.
pub fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(at..at.checked_add(8)?)?.try_into().ok()?,
    ))
}

/// A service call's or response's parts after its opcode ([`service_bytes`]): service,
/// call, encoding and payload; None when the bytes are too short for them.
pub fn service_parts(b: &[u8]) -> Option<(u32, u32, &[u8], &[u8])> {
    let n = u32_at(b, 9)? as usize;
    let end = 13usize.checked_add(n)?;
    Some((u32_at(b, 1)?, u32_at(b, 5)?, b.get(13..end)?, b.get(end..)?))
}

/// Parses a client's binary message.
pub fn parse_client_binary(b: &[u8]) -> Result<ClientMessage, BadClientMessage> {
    match b.first() {
        Some(&OP_SERVICE_CALL) => {
            let (service, call_id, encoding, payload) =
                service_parts(b).ok_or(BadClientMessage::ShortCall(b.len()))?;
            Ok(ClientMessage::ServiceCall {
                service,
                call_id,
                encoding: String::from_utf8_lossy(encoding).into_owned(),
                payload: payload.to_vec(),
            })
        }
        Some(op) => Ok(ClientMessage::Unsupported(format!("binary opcode {op}"))),
        None => Err(BadClientMessage::Empty),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binary_schema_is_advertised_in_base64_and_a_text_one_as_text() {
        let ads = [
            ChannelAd {
                id: 3,
                topic: "/lrbc/frame".into(),
                encoding: "flatbuffer".into(),
                schema_name: "lrbc.recording.Frame".into(),
                schema_encoding: Some("flatbuffer".into()),
                schema: vec![0, 1, 2],
            },
            ChannelAd {
                id: 4,
                topic: "/lrbc/state".into(),
                encoding: "json".into(),
                schema_name: String::new(),
                schema_encoding: None,
                schema: Vec::new(),
            },
        ];
        let v: serde_json::Value = serde_json::from_str(&advertise(&ads)).unwrap_or_default();
        assert_eq!(v["channels"][0]["schema"], "AAEC");
        assert_eq!(v["channels"][0]["schemaEncoding"], "flatbuffer");
        assert_eq!(v["channels"][1]["schema"], "");
        assert!(v["channels"][1].get("schemaEncoding").is_none());
    }

    #[test]
    fn client_messages_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse_client_text(r#"{"op":"subscribe","subscriptions":[{"id":1,"channelId":7}]}"#),
            Ok(ClientMessage::Subscribe(vec![(1, 7)]))
        );
        assert_eq!(
            parse_client_text(r#"{"op":"unsubscribe","subscriptionIds":[1,2]}"#),
            Ok(ClientMessage::Unsubscribe(vec![1, 2]))
        );
        assert_eq!(
            parse_client_text(r#"{"op":"getParameters"}"#),
            Ok(ClientMessage::Unsupported("getParameters".into()))
        );
        for (bad, says) in [
            ("{", "not JSON"),
            ("{}", "without \"op\""),
            (r#"{"op":"subscribe"}"#, "without subscriptions"),
            (
                r#"{"op":"subscribe","subscriptions":[{"id":-1}]}"#,
                "subscribe:",
            ),
        ] {
            let e = parse_client_text(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let call = service_bytes(OP_SERVICE_CALL, 5, 6, "json", b"{}");
        assert_eq!(
            parse_client_binary(&call),
            Ok(ClientMessage::ServiceCall {
                service: 5,
                call_id: 6,
                encoding: "json".into(),
                payload: b"{}".to_vec()
            })
        );
        assert!(parse_client_binary(&call[..14]).is_err());
        let mut huge = call.clone();
        huge[9..13].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse_client_binary(&huge).is_err());
        assert!(parse_client_binary(&[]).is_err());
    }

    #[test]
    fn a_message_header_carries_the_subscription_and_the_time() {
        let h = message_data_header(7, 99);
        assert_eq!(h[0], OP_MESSAGE_DATA);
        assert_eq!(h[1..5], 7u32.to_le_bytes());
        assert_eq!(h[5..13], 99u64.to_le_bytes());
    }
}
