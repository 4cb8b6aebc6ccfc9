//! The messages of the Foxglove WebSocket protocol (`foxglove.sdk.v1`) that a viewer
//! reads and writes: JSON text messages and the binary layouts, little-endian.

use base64::Engine as _;
use serde::Deserialize;

pub use crate::protocol::{
    OP_MESSAGE_DATA, OP_SERVICE_CALL, OP_SERVICE_RESPONSE, OP_TIME, is_binary_schema,
};
use crate::protocol::{service_parts, u32_at, u64_at};

/// A channel the server advertised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdvertisedChannel {
    pub id: u64,
    pub topic: String,
    pub encoding: String,
    pub schema_name: String,
    /// The schema's bytes (base64 on the wire for binary schema encodings).
    pub schema: Vec<u8>,
    pub schema_encoding: Option<String>,
}

/// A service the server advertised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdvertisedService {
    pub id: u32,
    pub name: String,
}

/// What the server said.
#[derive(Clone, Debug, PartialEq)]
pub enum ServerMessage {
    ServerInfo {
        name: String,
        capabilities: Vec<String>,
        session_id: Option<String>,
    },
    Status {
        level: u8,
        message: String,
        id: Option<String>,
    },
    Advertise(Vec<AdvertisedChannel>),
    Unadvertise(Vec<u64>),
    AdvertiseServices(Vec<AdvertisedService>),
    UnadvertiseServices(Vec<u32>),
    ServiceCallFailure {
        call_id: u32,
        message: String,
    },
    /// A message on subscription `subscription`, with its log time (Unix ns).
    MessageData {
        subscription: u32,
        log_time: u64,
        data: Vec<u8>,
    },
    Time(u64),
    ServiceResponse {
        service: u32,
        call_id: u32,
        encoding: String,
        data: Vec<u8>,
    },
    /// A message this viewer does not use (its `op`).
    Other(String),
}

/// A message the server sent that does not follow the protocol, as one line.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the server sent a malformed message: {0}")]
pub struct Malformed(pub String);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ChannelJson {
    id: u64,
    topic: String,
    encoding: String,
    schema_name: String,
    schema: String,
    schema_encoding: Option<String>,
}

impl ChannelJson {
    fn into_channel(self) -> Result<AdvertisedChannel, Malformed> {
        let schema = if is_binary_schema(self.schema_encoding.as_deref()) {
            base64::engine::general_purpose::STANDARD
                .decode(self.schema.as_bytes())
                .map_err(|e| {
                    Malformed(format!("the schema of {} is not base64: {e}", self.topic))
                })?
        } else {
            self.schema.into_bytes()
        };
        Ok(AdvertisedChannel {
            id: self.id,
            topic: self.topic,
            encoding: self.encoding,
            schema_name: self.schema_name,
            schema,
            schema_encoding: self.schema_encoding,
        })
    }
}

fn field<'a>(
    v: &'a serde_json::Value,
    name: &str,
    op: &str,
) -> Result<&'a serde_json::Value, Malformed> {
    v.get(name)
        .ok_or_else(|| Malformed(format!("{op} without {name}")))
}

fn parse<T: for<'de> Deserialize<'de>>(v: &serde_json::Value, what: &str) -> Result<T, Malformed> {
    T::deserialize(v).map_err(|e| Malformed(format!("{what}: {e}")))
}

/// Parses a text message.
pub fn parse_text(text: &str) -> Result<ServerMessage, Malformed> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| Malformed(format!("not JSON: {e}")))?;
    let op = v["op"]
        .as_str()
        .ok_or_else(|| Malformed("a text message without \"op\"".into()))?;
    Ok(match op {
        "serverInfo" => ServerMessage::ServerInfo {
            name: v["name"].as_str().unwrap_or_default().to_string(),
            capabilities: parse(&v["capabilities"], "serverInfo capabilities")?,
            session_id: v["sessionId"].as_str().map(str::to_string),
        },
        "status" => ServerMessage::Status {
            level: parse(field(&v, "level", op)?, "status level")?,
            message: v["message"].as_str().unwrap_or_default().to_string(),
            id: v["id"].as_str().map(str::to_string),
        },
        "advertise" => {
            let channels: Vec<ChannelJson> = parse(field(&v, "channels", op)?, "advertise")?;
            ServerMessage::Advertise(
                channels
                    .into_iter()
                    .map(ChannelJson::into_channel)
                    .collect::<Result<_, _>>()?,
            )
        }
        "unadvertise" => ServerMessage::Unadvertise(parse(field(&v, "channelIds", op)?, op)?),
        "advertiseServices" => {
            #[derive(Deserialize)]
            struct S {
                id: u32,
                name: String,
            }
            let services: Vec<S> = parse(field(&v, "services", op)?, op)?;
            ServerMessage::AdvertiseServices(
                services
                    .into_iter()
                    .map(|s| AdvertisedService {
                        id: s.id,
                        name: s.name,
                    })
                    .collect(),
            )
        }
        "unadvertiseServices" => {
            ServerMessage::UnadvertiseServices(parse(field(&v, "serviceIds", op)?, op)?)
        }
        "serviceCallFailure" => ServerMessage::ServiceCallFailure {
            call_id: parse(field(&v, "callId", op)?, op)?,
            message: v["message"].as_str().unwrap_or_default().to_string(),
        },
        other => ServerMessage::Other(other.to_string()),
    })
}

/// Parses a binary message.
pub fn parse_binary(b: &[u8]) -> Result<ServerMessage, Malformed> {
    let short = |what: &str| Malformed(format!("a {what} of {} bytes is too short", b.len()));
    match b.first() {
        Some(&OP_MESSAGE_DATA) => Ok(ServerMessage::MessageData {
            subscription: u32_at(b, 1).ok_or_else(|| short("message"))?,
            log_time: u64_at(b, 5).ok_or_else(|| short("message"))?,
            data: b[13..].to_vec(),
        }),
        Some(&OP_TIME) => Ok(ServerMessage::Time(
            u64_at(b, 1).ok_or_else(|| short("time"))?,
        )),
        Some(&OP_SERVICE_RESPONSE) => {
            let (service, call_id, encoding, data) =
                service_parts(b).ok_or_else(|| short("service response"))?;
            Ok(ServerMessage::ServiceResponse {
                service,
                call_id,
                encoding: String::from_utf8_lossy(encoding).into_owned(),
                data: data.to_vec(),
            })
        }
        Some(op) => Ok(ServerMessage::Other(format!("binary opcode {op}"))),
        None => Err(Malformed("an empty binary message".into())),
    }
}

/// The text of a subscription to `channel` as `subscription`.
pub fn subscribe(pairs: &[(u32, u64)]) -> String {
    let subs: Vec<_> = pairs
        .iter()
        .map(|&(id, channel)| serde_json::json!({"id": id, "channelId": channel}))
        .collect();
    serde_json::json!({"op": "subscribe", "subscriptions": subs}).to_string()
}

/// The text that ends subscriptions.
pub fn unsubscribe(ids: &[u32]) -> String {
    serde_json::json!({"op": "unsubscribe", "subscriptionIds": ids}).to_string()
}

/// The bytes of a service call.
pub fn service_call(service: u32, call_id: u32, encoding: &str, payload: &[u8]) -> Vec<u8> {
    crate::protocol::service_bytes(OP_SERVICE_CALL, service, call_id, encoding, payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_advertisement_decodes_a_binary_schema_from_base64() {
        let text = r#"{"op":"advertise","channels":[
            {"id":3,"topic":"/lrbc/frame","encoding":"flatbuffer","schemaName":"lrbc.recording.Frame","schema":"AAEC","schemaEncoding":"flatbuffer"},
            {"id":4,"topic":"/lrbc/state","encoding":"json","schemaName":"","schema":""}]}"#;
        let ServerMessage::Advertise(c) = parse_text(text).unwrap_or(ServerMessage::Time(0)) else {
            panic!("not an advertisement");
        };
        assert_eq!(c[0].schema, [0, 1, 2]);
        assert_eq!(c[1].topic, "/lrbc/state");
        assert!(c[1].schema.is_empty());
        let bad = text.replace("AAEC", "%%%");
        assert!(parse_text(&bad).is_err_and(|e| e.0.contains("base64")));
    }

    #[test]
    fn binary_messages_decode_and_short_ones_are_refused() {
        let mut b = vec![OP_MESSAGE_DATA];
        b.extend_from_slice(&7u32.to_le_bytes());
        b.extend_from_slice(&99u64.to_le_bytes());
        b.extend_from_slice(b"xyz");
        assert_eq!(
            parse_binary(&b),
            Ok(ServerMessage::MessageData {
                subscription: 7,
                log_time: 99,
                data: b"xyz".to_vec()
            })
        );
        assert!(parse_binary(&b[..10]).is_err());
        assert!(parse_binary(&[]).is_err());
        let mut r = service_call(5, 6, "json", b"{}");
        r[0] = OP_SERVICE_RESPONSE;
        assert_eq!(
            parse_binary(&r),
            Ok(ServerMessage::ServiceResponse {
                service: 5,
                call_id: 6,
                encoding: "json".into(),
                data: b"{}".to_vec()
            })
        );
        r.truncate(14);
        assert!(parse_binary(&r).is_err());
    }

    #[test]
    fn text_that_is_not_the_protocol_says_why() {
        for (text, says) in [
            ("nope", "not JSON"),
            (r#"{"a":1}"#, "without \"op\""),
            (r#"{"op":"advertise"}"#, "without channels"),
            (r#"{"op":"status","level":"x"}"#, "status level"),
        ] {
            let e = parse_text(text).err().map(|e| e.0).unwrap_or_default();
            assert!(e.contains(says), "{text}: {e}");
        }
        assert_eq!(
            parse_text(r#"{"op":"newThing"}"#),
            Ok(ServerMessage::Other("newThing".into()))
        );
    }
}
