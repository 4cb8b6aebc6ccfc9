//! Camera images of the image region as the recorder writes them (`foxglove.RawImage`)
//! or as `serve --image-format` sends them (`foxglove.CompressedImage`, PNG or JPEG):
//! read back into the region's pixel layout whichever they are ([`region_pixels`]), and
//! a raw image compressed for a thin link ([`compress`]).

use std::borrow::Cow;

use lrbc::rpc::foxglove_fb as fox;

/// How camera images go out: as recorded, or compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ImageEncoding {
    /// `foxglove.RawImage`, the region's bytes as they are.
    #[default]
    Raw,
    /// `foxglove.CompressedImage` of format `png` (lossless).
    Png,
    /// `foxglove.CompressedImage` of format `jpeg` at a quality of 1 to 100.
    Jpeg { quality: u8 },
}

impl ImageEncoding {
    /// True when images are sent as `foxglove.CompressedImage`.
    pub fn compresses(self) -> bool {
        self != Self::Raw
    }
}

/// Why a raw image was not compressed, as one line.
#[derive(Debug, thiserror::Error)]
pub enum CompressImageError {
    /// The bytes are not a `foxglove.RawImage`.
    #[error("not a RawImage: {}", lrbc::rpc::one_line(.0))]
    NotRaw(flatbuffers::InvalidFlatbuffer),
    /// A pixel encoding other than `mono8`, `rgb8`, `rgba8` and `16UC1`.
    #[error("raw images of encoding {0:?} are not compressed")]
    Encoding(String),
    /// No pixel, or rows `step` bytes apart shorter than a row.
    #[error("unusable raw image {width}×{height}, step {step}")]
    Unusable {
        width: u32,
        height: u32,
        step: usize,
    },
    /// Fewer bytes than its rows.
    #[error("raw image {width}×{height} {encoding} is cut short")]
    CutShort {
        width: u32,
        height: u32,
        encoding: String,
    },
    #[error("JPEG: {0}")]
    Jpeg(#[source] image::ImageError),
    #[error("PNG: {0}")]
    Png(#[source] image::ImageError),
}

/// One camera image's rows: `step` bytes apart, each at least a row of the region.
#[derive(Debug)]
pub struct Rows<'a> {
    pub data: Cow<'a, [u8]>,
    pub step: usize,
}

/// The pixel encoding of the region's images with `channels` bytes a pixel.
pub fn raw_encoding(channels: u32) -> Option<&'static str> {
    match channels {
        1 => Some("mono8"),
        3 => Some("rgb8"),
        4 => Some("rgba8"),
        _ => None,
    }
}

/// The rows of a camera image of `width`×`height` pixels of `channels` bytes, from a
/// `foxglove.RawImage` of that size and encoding or a `foxglove.CompressedImage` (PNG or
/// JPEG) of that size; `None` for anything else. A `RawImage` always names its encoding,
/// a `CompressedImage` has no such field: that tells the two apart.
pub fn region_pixels(bytes: &[u8], (width, height, channels): (u32, u32, u32)) -> Option<Rows<'_>> {
    let encoding = raw_encoding(channels)?;
    let row = width as usize * channels as usize;
    if row == 0 || height == 0 {
        return None;
    }
    if let Ok(raw) = fox::root_as_raw_image(bytes)
        && let Some(e) = raw.encoding()
    {
        let step = raw.step() as usize;
        let data = raw.data().map(|d| d.bytes()).unwrap_or_default();
        let fits = raw.width() == width
            && raw.height() == height
            && e == encoding
            && step >= row
            && step
                .checked_mul(height as usize - 1)
                .and_then(|n| n.checked_add(row))
                .is_some_and(|need| data.len() >= need);
        return fits.then_some(Rows {
            data: Cow::Borrowed(data),
            step,
        });
    }
    let c = flatbuffers::root::<fox::CompressedImage<'_>>(bytes).ok()?;
    let image = super::decode_compressed(c.data()?.bytes(), c.format()?).ok()?;
    if image.width() != width || image.height() != height {
        return None;
    }
    let data = match channels {
        1 => image.into_luma8().into_raw(),
        3 => image.into_rgb8().into_raw(),
        _ => image.into_rgba8().into_raw(),
    };
    Some(Rows {
        data: Cow::Owned(data),
        step: row,
    })
}

/// The `foxglove.CompressedImage` of a `foxglove.RawImage` (`mono8`, `rgb8`, `rgba8` or
/// `16UC1`), with its time and frame id: PNG, or JPEG (alpha dropped; 16-bit depth goes
/// as PNG, which JPEG cannot hold). `builder` is reused between calls.
pub fn compress(
    raw_bytes: &[u8],
    format: ImageEncoding,
    builder: &mut flatbuffers::FlatBufferBuilder<'static>,
) -> Result<Vec<u8>, CompressImageError> {
    use image::{ExtendedColorType, ImageEncoder};
    let raw = fox::root_as_raw_image(raw_bytes).map_err(CompressImageError::NotRaw)?;
    let (w, h) = (raw.width(), raw.height());
    let encoding = raw.encoding().unwrap_or_default();
    let (color, bytes_per_pixel) = match encoding {
        "mono8" => (ExtendedColorType::L8, 1),
        "rgb8" => (ExtendedColorType::Rgb8, 3),
        "rgba8" => (ExtendedColorType::Rgba8, 4),
        "16UC1" => (ExtendedColorType::L16, 2),
        other => return Err(CompressImageError::Encoding(other.to_string())),
    };
    let row = w as usize * bytes_per_pixel;
    let step = raw.step() as usize;
    let data = raw.data().map(|d| d.bytes()).unwrap_or_default();
    if row == 0 || h == 0 || step < row {
        return Err(CompressImageError::Unusable {
            width: w,
            height: h,
            step,
        });
    }
    let mut packed = Vec::with_capacity(row * h as usize);
    for y in 0..h as usize {
        let line =
            data.get(y * step..y * step + row)
                .ok_or_else(|| CompressImageError::CutShort {
                    width: w,
                    height: h,
                    encoding: encoding.to_string(),
                })?;
        packed.extend_from_slice(line);
    }
    if color == ExtendedColorType::L16 {
        // The raw image's samples are little-endian; the encoder takes the machine's.
        for s in packed.chunks_exact_mut(2) {
            let v = u16::from_le_bytes([s[0], s[1]]);
            s.copy_from_slice(&v.to_ne_bytes());
        }
    }
    let mut out = Vec::new();
    let name = match format {
        ImageEncoding::Jpeg { quality } if color != ExtendedColorType::L16 => {
            let (pixels, color) = if color == ExtendedColorType::Rgba8 {
                let rgb: Vec<u8> = (packed.chunks_exact(4))
                    .flat_map(|p| [p[0], p[1], p[2]])
                    .collect();
                (rgb, ExtendedColorType::Rgb8)
            } else {
                (packed, color)
            };
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality.clamp(1, 100))
                .write_image(&pixels, w, h, color)
                .map_err(CompressImageError::Jpeg)?;
            "jpeg"
        }
        _ => {
            image::codecs::png::PngEncoder::new_with_quality(
                &mut out,
                image::codecs::png::CompressionType::Fast,
                image::codecs::png::FilterType::Adaptive,
            )
            .write_image(&packed, w, h, color)
            .map_err(CompressImageError::Png)?;
            "png"
        }
    };
    let b = builder;
    b.reset();
    let frame_id = b.create_string(raw.frame_id().unwrap_or_default());
    let format = b.create_string(name);
    let data = b.create_vector(&out);
    let image = fox::CompressedImage::create(
        b,
        &fox::CompressedImageArgs {
            timestamp: raw.timestamp(),
            frame_id: Some(frame_id),
            data: Some(data),
            format: Some(format),
        },
    );
    b.finish(image, None);
    Ok(b.finished_data().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw_image(
        w: u32,
        h: u32,
        channels: u32,
        step: u32,
        pixel: impl Fn(u32, u32, u32) -> u8,
    ) -> Vec<u8> {
        let mut b = flatbuffers::FlatBufferBuilder::new();
        let mut data = vec![0u8; (step * h) as usize];
        for y in 0..h {
            for x in 0..w {
                for c in 0..channels {
                    data[(y * step + x * channels + c) as usize] = pixel(x, y, c);
                }
            }
        }
        let frame_id = b.create_string("env3");
        let encoding = b.create_string(raw_encoding(channels).unwrap_or("16UC1"));
        let data = b.create_vector(&data);
        let t = fox::Time::new(12, 345);
        let image = fox::RawImage::create(
            &mut b,
            &fox::RawImageArgs {
                timestamp: Some(&t),
                frame_id: Some(frame_id),
                width: w,
                height: h,
                encoding: Some(encoding),
                step,
                data: Some(data),
            },
        );
        b.finish(image, None);
        b.finished_data().to_vec()
    }

    fn gradient(x: u32, y: u32, c: u32) -> u8 {
        (x * 4 + y * 2 + c * 40) as u8
    }

    #[test]
    fn png_gives_back_the_raw_pixels_exactly_with_the_time_and_frame_id() {
        let raw = raw_image(20, 10, 3, 64, gradient);
        let mut b = flatbuffers::FlatBufferBuilder::new();
        let png = compress(&raw, ImageEncoding::Png, &mut b).unwrap();
        let c = flatbuffers::root::<fox::CompressedImage<'_>>(&png).unwrap();
        assert_eq!(c.format(), Some("png"));
        assert_eq!(c.frame_id(), Some("env3"));
        assert_eq!(c.timestamp().map(|t| (t.sec(), t.nsec())), Some((12, 345)));
        let rows = region_pixels(&png, (20, 10, 3)).unwrap();
        assert_eq!(rows.step, 60);
        let from_raw = region_pixels(&raw, (20, 10, 3)).unwrap();
        assert_eq!(from_raw.step, 64);
        for y in 0..10 {
            assert_eq!(
                rows.data[y * 60..y * 60 + 60],
                from_raw.data[y * 64..y * 64 + 60],
                "row {y}"
            );
        }
    }

    #[test]
    fn jpeg_is_close_to_the_raw_pixels_and_smaller() {
        let smooth = |x: u32, y: u32, c: u32| (x * 2 + y + c * 30) as u8;
        let raw = raw_image(64, 64, 4, 256, smooth);
        let mut b = flatbuffers::FlatBufferBuilder::new();
        let jpeg = compress(&raw, ImageEncoding::Jpeg { quality: 90 }, &mut b).unwrap();
        assert_eq!(
            flatbuffers::root::<fox::CompressedImage<'_>>(&jpeg)
                .unwrap()
                .format(),
            Some("jpeg")
        );
        assert!(
            jpeg.len() < raw.len() / 2,
            "{} of {}",
            jpeg.len(),
            raw.len()
        );
        let rows = region_pixels(&jpeg, (64, 64, 4)).unwrap();
        let mut worst = 0;
        for y in 0..64u32 {
            for x in 0..64u32 {
                for c in 0..3u32 {
                    let got = rows.data[(y * 256 + x * 4 + c) as usize];
                    worst = worst.max(got.abs_diff(smooth(x, y, c)));
                }
                // JPEG has no alpha: opaque.
                assert_eq!(rows.data[(y * 256 + x * 4 + 3) as usize], 255);
            }
        }
        assert!(worst <= 12, "{worst}");
    }

    #[test]
    fn images_of_another_size_or_encoding_are_not_the_regions() {
        let raw = raw_image(20, 10, 3, 60, gradient);
        assert!(region_pixels(&raw, (20, 10, 3)).is_some());
        assert!(region_pixels(&raw, (21, 10, 3)).is_none());
        assert!(region_pixels(&raw, (20, 10, 4)).is_none());
        let mut b = flatbuffers::FlatBufferBuilder::new();
        let png = compress(&raw, ImageEncoding::Png, &mut b).unwrap();
        assert!(region_pixels(&png, (20, 11, 3)).is_none());
        assert!(region_pixels(b"not an image", (20, 10, 3)).is_none());
        // A cut raw image is refused, not read past its end.
        let short = raw_image(20, 10, 3, 60, gradient);
        let cut = &short[..short.len() - 100];
        assert!(region_pixels(cut, (20, 10, 3)).is_none());
    }

    #[test]
    fn depth_goes_as_16_bit_png_whatever_was_asked() {
        let mut b = flatbuffers::FlatBufferBuilder::new();
        let raw = raw_image(
            8,
            4,
            2,
            16,
            |x, y, c| if c == 0 { (x + y) as u8 } else { 1 },
        );
        // raw_image names 2-byte pixels 16UC1.
        let out = compress(&raw, ImageEncoding::Jpeg { quality: 80 }, &mut b).unwrap();
        let c = flatbuffers::root::<fox::CompressedImage<'_>>(&out).unwrap();
        assert_eq!(c.format(), Some("png"));
        let img = crate::format::decode_compressed(c.data().unwrap().bytes(), "png").unwrap();
        let v = img.into_luma16();
        // Little-endian 1 << 8 | (x + y).
        assert_eq!(v.get_pixel(3, 2).0[0], 256 + 5);
    }

    #[test]
    fn images_that_are_not_compressed_say_why_in_the_lines_of_before() {
        let mut b = flatbuffers::FlatBufferBuilder::new();
        // No pixel in a row.
        let e = compress(
            &raw_image(0, 10, 3, 60, gradient),
            ImageEncoding::Png,
            &mut b,
        )
        .unwrap_err();
        assert!(matches!(e, CompressImageError::Unusable { .. }), "{e}");
        assert_eq!(e.to_string(), "unusable raw image 0×10, step 60");
        let short = raw_image(20, 10, 3, 60, gradient);
        let e = compress(&short[..short.len() - 100], ImageEncoding::Png, &mut b).unwrap_err();
        assert!(e.to_string().starts_with("not a RawImage: "), "{e}");
        assert_eq!(
            CompressImageError::Encoding("bgr8".into()).to_string(),
            "raw images of encoding \"bgr8\" are not compressed"
        );
        assert_eq!(
            CompressImageError::CutShort {
                width: 4,
                height: 2,
                encoding: "rgb8".into()
            }
            .to_string(),
            "raw image 4×2 rgb8 is cut short"
        );
    }
}
