//! The image frames that envelopes carry: which stream a `CameraImageFrame` or
//! `ViewportImageFrame` payload belongs to, and its fields (size, format, pixel bytes)
//! not yet decoded. Decoding the pixels (raw, JPEG, PNG or 16-bit depth) is
//! `lrbc_recording::format`'s.

use super::fb;

/// An image frame's fields, not yet decoded.
#[derive(Clone, Debug)]
pub struct EncodedImage<'a> {
    /// "camera front (env 3)" or "viewport main".
    pub source: String,
    /// Width, height and channels, as the frame says.
    pub width: u32,
    pub height: u32,
    pub channels: u32,
    pub format: fb::ImageFormat,
    pub frame_number: u32,
    /// The pixels' bytes, in `format`.
    pub data: &'a [u8],
}

/// The image frame in an envelope, not yet decoded: `None` for any other payload (or
/// bytes that are not an envelope).
pub fn encoded_image(envelope: &[u8]) -> Option<EncodedImage<'_>> {
    if envelope.get(4..8) != Some(super::FILE_IDENTIFIER.as_slice()) {
        return None;
    }
    let env = fb::root_as_envelope(envelope).ok()?;
    if let Some(f) = env.payload_as_camera_image_frame() {
        let name = f.camera_name().unwrap_or("camera");
        return Some(EncodedImage {
            source: format!("camera {name} (env {})", f.env_index()),
            width: f.width(),
            height: f.height(),
            channels: f.channels(),
            format: f.format(),
            frame_number: f.frame_number(),
            data: f.data().map(|d| d.bytes()).unwrap_or_default(),
        });
    }
    if let Some(f) = env.payload_as_viewport_image_frame() {
        return Some(EncodedImage {
            source: format!("viewport {}", f.viewport_name().unwrap_or("?")),
            width: f.width(),
            height: f.height(),
            channels: f.channels(),
            format: f.format(),
            frame_number: f.frame_number(),
            data: f.data().map(|d| d.bytes()).unwrap_or_default(),
        });
    }
    None
}

/// Which stream an image frame belongs to ("camera front (env 3)"), without decoding
/// its pixels; `None` for any other payload.
pub fn image_source(envelope: &[u8]) -> Option<String> {
    encoded_image(envelope).map(|f| f.source)
}
