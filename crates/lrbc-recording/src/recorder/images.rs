//! Camera images in a recording, as Foxglove's `foxglove.RawImage` and
//! `foxglove.CompressedImage` (`schema/foxglove_image.fbs`): the recorded envs' images of
//! the image region when `image_seq` moves, on `/lrbc/camera/env<N>`, and the camera and
//! viewport frames streamed through the command rings, on `/lrbc/stream/<name>`.

use std::collections::HashMap;
use std::sync::Arc;

use super::{ChannelDef, Kind, Message, Prelude, SchemaDef};
use crate::format::{
    COMPRESSED_IMAGE_SCHEMA, RAW_IMAGE_SCHEMA, camera_topic, raw_encoding, stream_frame,
    stream_topic,
};
use lrbc::attach::Attached;
use lrbc::rpc::{FOXGLOVE_COMPRESSED_IMAGE_BFBS, FOXGLOVE_RAW_IMAGE_BFBS, fb, foxglove_fb as fox};
use lrbc::snapshot;

/// The most streams given a channel each (names come from the engine).
const MAX_STREAMS: usize = 256;

/// Follows the image region and picks image frames out of ring entries.
pub(super) struct Images {
    raw_schema: usize,
    compressed_schema: usize,
    /// (env, its channel) of the image region's recorded envs.
    env_channels: Vec<(u32, usize)>,
    streams: HashMap<String, usize>,
    last_image_seq: Option<u64>,
    builder: flatbuffers::FlatBufferBuilder<'static>,
    pub images: u64,
}

fn time(ns: u64) -> fox::Time {
    fox::Time::new(
        u32::try_from(ns / 1_000_000_000).unwrap_or(u32::MAX),
        (ns % 1_000_000_000) as u32,
    )
}

impl Images {
    /// Adds the image schemas and the recorded envs' camera channels to `prelude`.
    pub fn new(attached: &Attached, envs: &[u32], prelude: &mut Prelude) -> Self {
        prelude.schemas.push(SchemaDef {
            name: RAW_IMAGE_SCHEMA.into(),
            encoding: "flatbuffer".into(),
            data: std::borrow::Cow::Borrowed(FOXGLOVE_RAW_IMAGE_BFBS),
        });
        let raw_schema = prelude.schemas.len() - 1;
        prelude.schemas.push(SchemaDef {
            name: COMPRESSED_IMAGE_SCHEMA.into(),
            encoding: "flatbuffer".into(),
            data: std::borrow::Cow::Borrowed(FOXGLOVE_COMPRESSED_IMAGE_BFBS),
        });
        let compressed_schema = prelude.schemas.len() - 1;
        let mut env_channels = Vec::new();
        if attached
            .geometry
            .image
            .is_some_and(|i| raw_encoding(i.channels).is_some())
        {
            for &env in envs {
                prelude.channels.push(ChannelDef {
                    topic: camera_topic(env),
                    schema: Some(raw_schema),
                    message_encoding: "flatbuffer".into(),
                });
                env_channels.push((env, prelude.channels.len() - 1));
            }
        }
        Self {
            raw_schema,
            compressed_schema,
            env_channels,
            streams: HashMap::new(),
            last_image_seq: None,
            builder: flatbuffers::FlatBufferBuilder::new(),
            images: 0,
        }
    }

    /// Bytes of one copy of the recorded envs' images of the image region.
    pub fn region_bytes(attached: &Attached, envs: usize) -> u64 {
        attached
            .geometry
            .image
            .map_or(0, |i| i.bytes_per_env.saturating_mul(envs as u64))
    }

    /// `pixels` as a `foxglove.RawImage` message on `channel`, stamped by the engine at
    /// `stamp_ns` and seen at `log_time`.
    fn raw(
        &mut self,
        channel: usize,
        stamp_ns: u64,
        log_time: u64,
        frame_id: &str,
        pixels: Pixels<'_>,
    ) -> Message {
        let Pixels {
            width,
            height,
            encoding,
            step,
            data,
        } = pixels;
        let b = &mut self.builder;
        b.reset();
        let frame_id = b.create_string(frame_id);
        let encoding = b.create_string(encoding);
        let data = b.create_vector(data);
        let t = time(stamp_ns);
        let image = fox::RawImage::create(
            b,
            &fox::RawImageArgs {
                timestamp: Some(&t),
                frame_id: Some(frame_id),
                width,
                height,
                encoding: Some(encoding),
                step,
                data: Some(data),
            },
        );
        b.finish(image, None);
        self.images += 1;
        Message {
            channel,
            kind: Kind::Image,
            log_time,
            publish_time: stamp_ns,
            data: Arc::from(b.finished_data()),
        }
    }

    /// The recorded envs' images when `image_seq` moved since the last look (a torn copy
    /// is not kept).
    pub fn poll_region(
        &mut self,
        attached: &Attached,
        stamp_ns: u64,
        now: u64,
        out: &mut Vec<Message>,
    ) {
        let (seg, g) = (&attached.segment, &attached.geometry);
        let (Some(img), Some(ext)) = (g.image, g.counters.ext) else {
            return;
        };
        let Some(encoding) = raw_encoding(img.channels) else {
            return;
        };
        if self.env_channels.is_empty() {
            return;
        }
        let seq = seg.load_u64(ext.image_seq).unwrap_or(0);
        if seq == 0 || self.last_image_seq == Some(seq) {
            return;
        }
        let Ok(per_env) = usize::try_from(img.bytes_per_env) else {
            return;
        };
        let envs: Vec<u32> = self.env_channels.iter().map(|(e, _)| *e).collect();
        let copy = snapshot::guarded_read(seg, g, 16, |s| {
            envs.iter()
                .map(|&e| {
                    s.read_vec(img.offset_bytes + u64::from(e) * img.bytes_per_env, per_env)
                        .unwrap_or_default()
                })
                .collect::<Vec<_>>()
        });
        let seq_after = seg.load_u64(ext.image_seq).unwrap_or(0);
        if seq_after != seq || !(copy.consistent || copy.guard == snapshot::CopyGuard::Unguarded) {
            // Written during the copy: looked at again next time.
            return;
        }
        self.last_image_seq = Some(seq);
        let step = img.width.saturating_mul(img.channels);
        for (i, pixels) in copy.value.iter().enumerate() {
            let Some(&(env, channel)) = self.env_channels.get(i) else {
                continue;
            };
            if pixels.len() != per_env {
                continue;
            }
            let m = self.raw(
                channel,
                stamp_ns,
                now,
                &format!("env{env}"),
                Pixels {
                    width: img.width,
                    height: img.height,
                    encoding,
                    step,
                    data: pixels,
                },
            );
            out.push(m);
        }
    }

    /// The image in a ring entry, if it is a camera or viewport frame.
    pub fn poll_entry(
        &mut self,
        payload: &[u8],
        seen_ns: u64,
        prelude: &mut Prelude,
        out: &mut Vec<Message>,
    ) {
        let Some(frame) = stream_frame(payload) else {
            return;
        };
        let (name, (width, height, channels), format, stamp_ms, data) = frame;
        let stamp_ns = if stamp_ms != 0 {
            stamp_ms.saturating_mul(1_000_000)
        } else {
            seen_ns
        };
        let compressed = match format {
            fb::ImageFormat::Jpeg => Some("jpeg"),
            fb::ImageFormat::Png => Some("png"),
            _ => None,
        };
        let raw = match format {
            fb::ImageFormat::Raw => {
                raw_encoding(channels).map(|e| (e, width.saturating_mul(channels)))
            }
            fb::ImageFormat::Gray16 => Some(("16UC1", width.saturating_mul(2))),
            _ => None,
        };
        let schema = if compressed.is_some() {
            self.compressed_schema
        } else if raw.is_some() {
            self.raw_schema
        } else {
            return;
        };
        let channel = match self.streams.get(&name) {
            Some(&c) => c,
            None if self.streams.len() < MAX_STREAMS => {
                prelude.channels.push(ChannelDef {
                    topic: stream_topic(&name),
                    schema: Some(schema),
                    message_encoding: "flatbuffer".into(),
                });
                let c = prelude.channels.len() - 1;
                self.streams.insert(name.clone(), c);
                c
            }
            None => return,
        };
        if prelude.channels.get(channel).and_then(|c| c.schema) != Some(schema) {
            // The stream changed between raw and compressed: its channel keeps its schema.
            return;
        }
        if let Some(format) = compressed {
            let b = &mut self.builder;
            b.reset();
            let frame_id = b.create_string(&name);
            let format = b.create_string(format);
            let data = b.create_vector(data);
            let t = time(stamp_ns);
            let image = fox::CompressedImage::create(
                b,
                &fox::CompressedImageArgs {
                    timestamp: Some(&t),
                    frame_id: Some(frame_id),
                    data: Some(data),
                    format: Some(format),
                },
            );
            b.finish(image, None);
            self.images += 1;
            out.push(Message {
                channel,
                kind: Kind::Image,
                log_time: seen_ns,
                publish_time: stamp_ns,
                data: Arc::from(b.finished_data()),
            });
        } else if let Some((encoding, step)) = raw {
            let m = self.raw(
                channel,
                stamp_ns,
                seen_ns,
                &name,
                Pixels {
                    width,
                    height,
                    encoding,
                    step,
                    data,
                },
            );
            out.push(m);
        }
    }
}

/// One image's pixels as a `foxglove.RawImage` holds them: `height` rows of `step` bytes
/// in `encoding`.
struct Pixels<'a> {
    width: u32,
    height: u32,
    encoding: &'a str,
    step: u32,
    data: &'a [u8],
}
