//! Images decoded to RGBA, for display and saving: the image frames of envelopes
//! (`CameraImageFrame`, `ViewportImageFrame`: raw pixels, JPEG, PNG or 16-bit depth) and
//! the data of `foxglove.CompressedImage` (PNG or JPEG), each within a size limit.

use lrbc::rpc::fb;
use lrbc::rpc::image::{EncodedImage, encoded_image};

/// One streamed image, decoded.
#[derive(Clone, Debug)]
pub struct StreamImage {
    /// "camera front (env 3)" or "viewport main".
    pub source: String,
    pub format: &'static str,
    pub frame_number: u32,
    pub rgba: image::RgbaImage,
}

/// The largest image accepted (pixels): a bad width × height must not allocate gigabytes.
const MAX_PIXELS: u64 = 64 << 20;

/// Why an image cannot be shown, as one line.
#[derive(Debug, thiserror::Error)]
pub enum PixelsError {
    #[error("unknown image format {0}")]
    UnknownFormat(u8),
    #[error("images of format {0:?} are not read (jpeg and png are)")]
    NotRead(String),
    #[error("cannot decode the {format:?} data: {source}")]
    Decode {
        format: image::ImageFormat,
        source: image::ImageError,
    },
    #[error("unusable size {width}×{height}")]
    Size { width: u32, height: u32 },
    #[error("too large")]
    TooLarge,
    #[error("raw image with {0} channels (1, 3 or 4 expected)")]
    Channels(u32),
    /// Fewer bytes than the size says: the kind ("raw 4×4×3", "gray16 4×4"), the bytes
    /// needed and those the frame has.
    #[error("{kind} needs {need} bytes, the frame has {has}")]
    Short {
        kind: String,
        need: usize,
        has: usize,
    },
    #[error("bad {0} image")]
    Bad(&'static str),
}

/// The image in an envelope, if its payload is an image frame: `None` for any other
/// payload (or bytes that are not an envelope), `Some(Err)` when the frame is unusable.
pub fn image_of(envelope: &[u8]) -> Option<Result<StreamImage, PixelsError>> {
    let f = encoded_image(envelope)?;
    Some(decode(f))
}

fn decode(f: EncodedImage<'_>) -> Result<StreamImage, PixelsError> {
    let EncodedImage {
        source,
        width,
        height,
        channels,
        format,
        frame_number,
        data,
    } = f;
    let (format_name, rgba) = match format {
        fb::ImageFormat::Jpeg => ("jpeg", encoded(data, image::ImageFormat::Jpeg)?),
        fb::ImageFormat::Png => ("png", encoded(data, image::ImageFormat::Png)?),
        fb::ImageFormat::Raw => ("raw", raw(width, height, channels, data)?),
        fb::ImageFormat::Gray16 => ("gray16", gray16(width, height, data)?),
        other => return Err(PixelsError::UnknownFormat(other.0)),
    };
    Ok(StreamImage {
        source,
        format: format_name,
        frame_number,
        rgba,
    })
}

fn encoded(data: &[u8], format: image::ImageFormat) -> Result<image::RgbaImage, PixelsError> {
    decode_in_limits(data, format).map(|i| i.to_rgba8())
}

/// A JPEG or PNG image within the size limit, as decoded.
fn decode_in_limits(
    data: &[u8],
    format: image::ImageFormat,
) -> Result<image::DynamicImage, PixelsError> {
    let mut reader = image::ImageReader::with_format(std::io::Cursor::new(data), format);
    let mut limits = image::Limits::default();
    limits.max_alloc = Some(MAX_PIXELS * 4);
    reader.limits(limits);
    reader
        .decode()
        .map_err(|source| PixelsError::Decode { format, source })
}

/// The image of a `foxglove.CompressedImage`'s data whose format is `format` ("jpeg" or
/// "png"; Foxglove's names, case as written by other tools too), within the size limit.
pub fn decode_compressed(data: &[u8], format: &str) -> Result<image::DynamicImage, PixelsError> {
    let f = match format.to_ascii_lowercase().as_str() {
        "jpeg" | "jpg" => image::ImageFormat::Jpeg,
        "png" => image::ImageFormat::Png,
        other => return Err(PixelsError::NotRead(other.into())),
    };
    decode_in_limits(data, f)
}

fn checked_len(width: u32, height: u32, bytes_per_pixel: u64) -> Result<usize, PixelsError> {
    let pixels = u64::from(width) * u64::from(height);
    if pixels == 0 || pixels > MAX_PIXELS {
        return Err(PixelsError::Size { width, height });
    }
    usize::try_from(pixels * bytes_per_pixel).map_err(|_| PixelsError::TooLarge)
}

fn raw(
    width: u32,
    height: u32,
    channels: u32,
    data: &[u8],
) -> Result<image::RgbaImage, PixelsError> {
    if !matches!(channels, 1 | 3 | 4) {
        return Err(PixelsError::Channels(channels));
    }
    let need = checked_len(width, height, u64::from(channels))?;
    let px = data.get(..need).ok_or_else(|| PixelsError::Short {
        kind: format!("raw {width}×{height}×{channels}"),
        need,
        has: data.len(),
    })?;
    let c = channels as usize;
    let mut out = Vec::with_capacity(need / c * 4);
    for p in px.chunks_exact(c) {
        match p {
            [g] => out.extend_from_slice(&[*g, *g, *g, 255]),
            [r, g, b] => out.extend_from_slice(&[*r, *g, *b, 255]),
            _ => out.extend_from_slice(p),
        }
    }
    image::RgbaImage::from_raw(width, height, out).ok_or(PixelsError::Bad("raw"))
}

/// Depth as grey: the nearest code white, the farthest black, 0 (no reading) black.
fn gray16(width: u32, height: u32, data: &[u8]) -> Result<image::RgbaImage, PixelsError> {
    let need = checked_len(width, height, 2)?;
    let px = data.get(..need).ok_or_else(|| PixelsError::Short {
        kind: format!("gray16 {width}×{height}"),
        need,
        has: data.len(),
    })?;
    let codes: Vec<u16> = px
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .collect();
    let (lo, hi) = codes
        .iter()
        .filter(|&&c| c != 0)
        .fold((u16::MAX, 0u16), |(lo, hi), &c| (lo.min(c), hi.max(c)));
    let span = f32::from(hi.saturating_sub(lo)).max(1.0);
    let mut out = Vec::with_capacity(codes.len() * 4);
    for c in codes {
        let v = if c == 0 {
            0
        } else {
            (255.0 - f32::from(c - lo) / span * 200.0) as u8
        };
        out.extend_from_slice(&[v, v, v, 255]);
    }
    image::RgbaImage::from_raw(width, height, out).ok_or(PixelsError::Bad("depth"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lrbc::rpc::image::image_source;

    fn camera_frame(
        width: u32,
        height: u32,
        channels: u32,
        format: fb::ImageFormat,
        data: &[u8],
    ) -> Vec<u8> {
        lrbc::rpc::build_envelope(7, fb::MethodId::CameraFrame, None, 1, |fbb| {
            let name = fbb.create_string("front");
            let data = fbb.create_vector(data);
            let f = fb::CameraImageFrame::create(
                fbb,
                &fb::CameraImageFrameArgs {
                    camera_name: Some(name),
                    env_index: 3,
                    width,
                    height,
                    channels,
                    format,
                    frame_number: 42,
                    data: Some(data),
                    ..Default::default()
                },
            );
            Some((fb::Payload::CameraImageFrame, f.as_union_value()))
        })
    }

    #[test]
    fn raw_png_and_jpeg_frames_decode_to_the_same_picture() {
        let (w, h) = (8u32, 4u32);
        let rgb: Vec<u8> = (0..w * h)
            .flat_map(|i| [(i * 8) as u8, 200, (255 - i * 8) as u8])
            .collect();
        let raw = image_of(&camera_frame(w, h, 3, fb::ImageFormat::Raw, &rgb))
            .expect("an image frame")
            .expect("decodes");
        assert_eq!(raw.source, "camera front (env 3)");
        assert_eq!(
            image_source(&camera_frame(w, h, 3, fb::ImageFormat::Raw, &rgb)).as_deref(),
            Some("camera front (env 3)")
        );
        assert_eq!(
            (raw.rgba.width(), raw.rgba.height(), raw.frame_number),
            (w, h, 42)
        );
        assert_eq!(raw.rgba.get_pixel(1, 0).0, [8, 200, 247, 255]);

        let mut png = Vec::new();
        image::RgbImage::from_raw(w, h, rgb.clone())
            .unwrap()
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let p = image_of(&camera_frame(w, h, 3, fb::ImageFormat::Png, &png))
            .unwrap()
            .unwrap();
        assert_eq!(p.format, "png");
        assert_eq!(p.rgba, raw.rgba, "PNG is lossless");

        let mut jpeg = Vec::new();
        image::RgbImage::from_raw(w, h, rgb)
            .unwrap()
            .write_to(
                &mut std::io::Cursor::new(&mut jpeg),
                image::ImageFormat::Jpeg,
            )
            .unwrap();
        let j = image_of(&camera_frame(w, h, 3, fb::ImageFormat::Jpeg, &jpeg))
            .unwrap()
            .unwrap();
        assert_eq!((j.format, j.rgba.dimensions()), ("jpeg", (w, h)));
    }

    #[test]
    fn bad_frames_are_explained_and_other_payloads_ignored() {
        let short = image_of(&camera_frame(8, 8, 3, fb::ImageFormat::Raw, &[0; 10])).unwrap();
        assert!(short.unwrap_err().to_string().contains("needs 192 bytes"));
        let huge = image_of(&camera_frame(
            u32::MAX,
            u32::MAX,
            3,
            fb::ImageFormat::Raw,
            &[],
        ))
        .unwrap();
        assert!(huge.unwrap_err().to_string().contains("unusable size"));
        let not_png = image_of(&camera_frame(8, 8, 3, fb::ImageFormat::Png, b"nope")).unwrap();
        assert!(not_png.is_err());
        let other = lrbc::rpc::build_envelope(1, fb::MethodId::GetJointState, None, 1, |_| None);
        assert!(image_of(&other).is_none());
        assert!(image_of(b"{\"json\": true}").is_none());
    }

    #[test]
    fn depth_shows_near_as_bright() {
        let codes: Vec<u8> = [0u16, 100, 200, 300]
            .iter()
            .flat_map(|c| c.to_le_bytes())
            .collect();
        let d = image_of(&camera_frame(4, 1, 1, fb::ImageFormat::Gray16, &codes))
            .unwrap()
            .unwrap();
        let v: Vec<u8> = (0..4).map(|x| d.rgba.get_pixel(x, 0).0[0]).collect();
        assert_eq!(v[0], 0, "no reading");
        assert!(v[1] > v[2] && v[2] > v[3], "{v:?}");
    }
}
