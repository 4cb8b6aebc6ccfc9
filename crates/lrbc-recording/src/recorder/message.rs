//! What a capture produces: the prelude of a file or stream (schemas, channels,
//! metadata records) and its encoded messages. Files (`file`), rolling buffers
//! (`rolling`) and servers (`lrbc_remote::server`) take these.

use std::collections::BTreeMap;
use std::sync::Arc;

/// A schema record: the crate's own schemas are static, a served run's come with it.
#[derive(Clone, Debug)]
pub struct SchemaDef {
    pub name: String,
    pub encoding: String,
    pub data: std::borrow::Cow<'static, [u8]>,
}

/// A channel record; `schema` indexes [`Prelude::schemas`] (None: no schema).
#[derive(Clone, Debug)]
pub struct ChannelDef {
    pub topic: String,
    pub schema: Option<usize>,
    pub message_encoding: String,
}

/// What a file starts with: schemas, channels and metadata records.
#[derive(Clone, Debug, Default)]
pub struct Prelude {
    pub schemas: Vec<SchemaDef>,
    pub channels: Vec<ChannelDef>,
    pub metadata: Vec<(String, BTreeMap<String, String>)>,
}

/// What a message holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Frame,
    RingEntry,
    /// A loss or a malformed entry of a ring, on `/lrbc/ring_events`.
    RingEvent,
    /// A luckyrobots entry's header, on `/lrbc/ring/<ring>/header`, just before its
    /// payload.
    RingHeader,
    /// A change of the segment's state, on `/lrbc/state`.
    State,
    /// An event of the detector, on `/lrbc/events` or `/lrbc/log`.
    Event,
    Image,
}

/// One encoded message; `channel` indexes [`Prelude::channels`].
#[derive(Clone, Debug)]
pub struct Message {
    pub channel: usize,
    pub kind: Kind,
    pub log_time: u64,
    pub publish_time: u64,
    pub data: Arc<[u8]>,
}

impl Message {
    pub fn is_frame(&self) -> bool {
        self.kind == Kind::Frame
    }
}
