//! The recording format, one place for the writer (`recorder`) and the readers (`replay`,
//! `export`): an MCAP file of profile [`PROFILE`] whose channels are the topics below,
//! the names of its schemas and metadata records, the frame table
//! `lrbc.recording.Frame` (`schema/recording.fbs`; [`FrameRef`] encodes one, [`RecFrame`]
//! decodes one, `frame`), the JSON messages and metadata both sides read and write
//! (`json`), the streams' names of camera and viewport frames (`streams`), and the
//! region's camera images read back whether raw or compressed (`camera`), images
//! decoded to RGBA, from envelopes' image frames or compressed data (`pixels`); chunks are
//! compressed with zstd unless asked otherwise (`compression`). What the recorder saw,
//! kept and lost is [`Counts`] (`counts`), read and written by every side in one form.
//!
//! A recording holds, on [`FRAME_TOPIC`], each consistent frame of the recorded envs;
//! on `/lrbc/ring/<ring>` ([`ring_topic`]) each command or control ring entry, decoded
//! and with its payload's exact bytes, as JSON ([`RING_ENTRY_SCHEMA`], `ring_entry`;
//! recordings of earlier versions hold the payload itself), a luckyrobots entry's
//! header just before it on
//! `/lrbc/ring/<ring>/header` ([`ring_header_topic`]); ring losses and malformed entries
//! on [`RING_EVENTS_TOPIC`]; the segment's state changes on [`STATE_TOPIC`]; the events the
//! detector found on [`EVENTS_TOPIC`] and, as Foxglove's log messages, on [`LOG_TOPIC`]
//! (`events`); the loop's rhythm on [`RHYTHM_TOPIC`] (`rhythm`); when asked for, camera images on `/lrbc/camera/env<N>` ([`camera_topic`]) and
//! `/lrbc/stream/<name>` ([`stream_topic`]). Metadata records describe the segment
//! ([`HEADER_METADATA`], [`GEOMETRY_METADATA`], [`NAMES_METADATA`], [`TOOL_METADATA`],
//! [`SEGMENT_METADATA`]) and, at the end, what was kept and lost ([`COUNTS_METADATA`]).

mod camera;
mod compression;
mod counts;
mod events;
mod frame;
mod json;
mod pixels;
mod rhythm;
mod ring_entry;
mod streams;

pub use camera::{
    CompressImageError, ImageEncoding, Rows, compress as compress_image, raw_encoding,
    region_pixels,
};
#[cfg(feature = "compression")]
pub use compression::compress_chunk;
pub use compression::{
    ChunkDecompressor, ChunkError, Compression, CompressionAsked, DEFAULT_ZSTD_LEVEL,
    NO_COMPRESSION, decompress_chunk, write_options,
};
pub use counts::{COUNTS_VERSION, Counts, CountsError};
pub use events::{EVENT_JSON_SCHEMA, LOG_JSON_SCHEMA, event_json, event_log_json, event_of};
pub use frame::{FrameError, FrameRef, RecFrame};
pub use json::{
    lucky_header_json, lucky_header_of, ring_event_json, ring_event_of, segment_from_metadata,
    segment_metadata,
};
pub use pixels::{PixelsError, StreamImage, decode_compressed, image_of};
pub use rhythm::{RHYTHM_JSON_SCHEMA, rhythm_json, rhythm_of};
pub use ring_entry::{
    RING_ENTRY_JSON_SCHEMA, RING_ENTRY_SCHEMA, ring_entry_json, ring_entry_payload,
};
pub use streams::{StreamFrame, stream_frame, stream_name_of};

use lrbc::layout::RegionKind;

/// The profile recordings carry in their MCAP header.
pub const PROFILE: &str = "lrbc";

/// The channel of frames.
pub const FRAME_TOPIC: &str = "/lrbc/frame";
/// The schema name of frames.
pub const FRAME_SCHEMA: &str = "lrbc.recording.Frame";
/// The schema name of the envelopes of LRBC ring entries (their channels in recordings
/// of earlier versions).
pub const ENVELOPE_SCHEMA: &str = "hazel.rpc.Envelope";
/// The schema name of raw camera images.
pub const RAW_IMAGE_SCHEMA: &str = "foxglove.RawImage";
/// The schema name of compressed camera images.
pub const COMPRESSED_IMAGE_SCHEMA: &str = "foxglove.CompressedImage";

/// The channel of ring losses and malformed ring entries: one JSON object per event,
/// `{"event": "lost", "ring", "lost_bytes", "lost_entries"}` (`lost_entries` null when
/// the ring cannot tell) or `{"event": "malformed", "ring", "position", "error",
/// "raw_hex"}`.
pub const RING_EVENTS_TOPIC: &str = "/lrbc/ring_events";
/// The channel of the segment's state changes (JSON: `state`, `note`, `frame_seq`):
/// truncated, unlinked, replaced, engine gone, and back to attached.
pub const STATE_TOPIC: &str = "/lrbc/state";

/// The channel of the events the recorder's detector found (JSON of schema
/// [`EVENT_SCHEMA`]): each event when found, again while it goes on (at most once a
/// second) and when it ends; a reader keeps the newest form of each `id`.
pub const EVENTS_TOPIC: &str = "/lrbc/events";
/// The schema name of `/lrbc/events`.
pub const EVENT_SCHEMA: &str = "lrbc.Event";
/// The same events as Foxglove's log messages ([`LOG_SCHEMA`]).
pub const LOG_TOPIC: &str = "/lrbc/log";
/// Foxglove's log message schema.
pub const LOG_SCHEMA: &str = "foxglove.Log";
/// The channel of the loop's rhythm (JSON of schema [`RHYTHM_SCHEMA`]): the recorder's
/// summary when a pause ends, at most once a second otherwise, and at the end; a reader
/// keeps the newest.
pub const RHYTHM_TOPIC: &str = "/lrbc/rhythm";
/// The schema name of `/lrbc/rhythm`.
pub const RHYTHM_SCHEMA: &str = "lrbc.Rhythm";

/// The metadata record of the header's fields, as shown.
pub const HEADER_METADATA: &str = "lrbc.header";
/// The metadata record of the geometry: layout, sizes, recorded envs, regions.
pub const GEOMETRY_METADATA: &str = "lrbc.geometry";
/// The metadata record of the observations' and actions' names (`obs.N`, `act.N`).
pub const NAMES_METADATA: &str = "lrbc.names";
/// The metadata record of the program that recorded (`name`, `version`).
pub const TOOL_METADATA: &str = "lrbc.tool";

/// The names region's names as the [`NAMES_METADATA`] record holds them: `obs.N` and
/// `act.N` to each name.
pub fn names_metadata(names: &lrbc::layout::Names) -> std::collections::BTreeMap<String, String> {
    let named = |prefix: &str, list: &[String]| {
        list.iter()
            .enumerate()
            .map(|(i, n)| (format!("{prefix}.{i}"), n.clone()))
            .collect::<Vec<_>>()
    };
    named("obs", &names.obs)
        .into_iter()
        .chain(named("act", &names.act))
        .collect()
}
/// The metadata record holding the bytes of the segment that layout detection reads
/// (header, names, ring headers): `size_bytes`, and `bytes@OFFSET` as lowercase hex.
pub const SEGMENT_METADATA: &str = "lrbc.segment";
/// The metadata record of the counts a recorder writes when it finishes
/// ([`Counts::to_metadata`]).
pub const COUNTS_METADATA: &str = "lrbc.counts";

/// The channel of the entries of `ring`: their payloads as written.
pub fn ring_topic(ring: RegionKind) -> String {
    format!("/lrbc/ring/{}", ring.as_str())
}

/// The ring of a `/lrbc/ring/<ring>` topic.
pub fn ring_of_topic(topic: &str) -> Option<RegionKind> {
    RegionKind::ring_named(topic.strip_prefix("/lrbc/ring/")?)
}

/// The channel of the luckyrobots entry headers of `ring`: one JSON object per entry,
/// `{"correlation_id": 7, "method_or_status": 2}`, written just before the entry's
/// payload on `/lrbc/ring/<ring>`.
pub fn ring_header_topic(ring: RegionKind) -> String {
    format!("/lrbc/ring/{}/header", ring.as_str())
}

/// The ring of a `/lrbc/ring/<ring>/header` topic.
pub fn ring_of_header_topic(topic: &str) -> Option<RegionKind> {
    let name = topic.strip_prefix("/lrbc/ring/")?.strip_suffix("/header")?;
    RegionKind::ring_named(name)
}

/// The channel of the image region's images of recorded env `env`.
pub fn camera_topic(env: u32) -> String {
    format!("/lrbc/camera/env{env}")
}

/// The camera env of a `/lrbc/camera/env<N>` topic.
pub fn camera_env_of_topic(topic: &str) -> Option<u32> {
    topic.strip_prefix("/lrbc/camera/env")?.parse().ok()
}

/// The channel of the frames of stream `name` ([`stream_name_of`]).
pub fn stream_topic(name: &str) -> String {
    format!("/lrbc/stream/{name}")
}

/// The stream of a `/lrbc/stream/<name>` topic.
pub fn stream_of_topic(topic: &str) -> Option<&str> {
    topic.strip_prefix("/lrbc/stream/")
}
