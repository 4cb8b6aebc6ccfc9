//! The streams of a recording: a ring entry that carries a camera or viewport frame
//! (`hazel.rpc.Envelope`) is the frame of a stream, recorded on `/lrbc/stream/<name>`.
//! The recorder names the stream from the entry; the reader finds the entry again by
//! that name.

use lrbc::rpc::fb;

/// `camera-front-env3`, `viewport-main`: a topic's last part.
/// A camera or viewport frame of a ring entry: its stream's name, (width, height,
/// channels), format, the engine's time stamp (ms) and the image bytes.
pub type StreamFrame<'a> = (String, (u32, u32, u32), fb::ImageFormat, u64, &'a [u8]);

/// The frame of a ring entry that carries a camera or viewport frame; None for any
/// other entry.
pub fn stream_frame(payload: &[u8]) -> Option<StreamFrame<'_>> {
    if payload.get(4..8) != Some(lrbc::rpc::FILE_IDENTIFIER.as_slice()) {
        return None;
    }
    let env = fb::root_as_envelope(payload).ok()?;
    if let Some(f) = env.payload_as_camera_image_frame() {
        Some((
            stream_name(
                "camera",
                f.camera_name().unwrap_or("camera"),
                Some(f.env_index()),
            ),
            (f.width(), f.height(), f.channels()),
            f.format(),
            f.timestamp_ms(),
            f.data().map(|d| d.bytes()).unwrap_or_default(),
        ))
    } else {
        let f = env.payload_as_viewport_image_frame()?;
        Some((
            stream_name("viewport", f.viewport_name().unwrap_or("viewport"), None),
            (f.width(), f.height(), f.channels()),
            f.format(),
            f.timestamp_ms(),
            f.data().map(|d| d.bytes()).unwrap_or_default(),
        ))
    }
}

/// The stream of a ring entry that carries a camera or viewport frame, as the recorder
/// names its topic (`/lrbc/stream/<name>`: `camera-<name>-env<N>`, `viewport-<name>`).
pub fn stream_name_of(payload: &[u8]) -> Option<String> {
    stream_frame(payload).map(|f| f.0)
}

fn stream_name(kind: &str, name: &str, env: Option<u32>) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    match env {
        Some(e) => format!("{kind}-{clean}-env{e}"),
        None => format!("{kind}-{clean}"),
    }
}
