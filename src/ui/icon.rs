//! The application icon of the window (title bar, task bar, window switcher): the
//! 256 px PNG of `assets/` (made by `assets/generate`), built into the binary.
//!
//! The Windows executable carries the same mark as an `.ico` resource (see `build.rs`).

/// The icon, as `assets/generate` draws it: a 256×256 RGBA PNG.
const ICON_PNG: &[u8] = include_bytes!("../../assets/icon-256.png");

/// The window icon (`egui::ViewportBuilder::with_icon`): the decoded 256×256 RGBA
/// pixels. The PNG is built in, so decoding does not fail in practice; if it did, the
/// default (empty) icon is returned and the window keeps the platform's icon.
pub fn window_icon() -> egui::IconData {
    match image::load_from_memory_with_format(ICON_PNG, image::ImageFormat::Png) {
        Ok(img) => {
            let rgba = img.into_rgba8();
            let (width, height) = rgba.dimensions();
            egui::IconData {
                rgba: rgba.into_raw(),
                width,
                height,
            }
        }
        Err(_) => egui::IconData::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u32 = 256;

    /// The RGBA of the pixel at (x, y).
    fn pixel(icon: &egui::IconData, x: u32, y: u32) -> [u8; 4] {
        let i = ((y * icon.width + x) * 4) as usize;
        [
            icon.rgba[i],
            icon.rgba[i + 1],
            icon.rgba[i + 2],
            icon.rgba[i + 3],
        ]
    }

    /// The point of the ring (the lens, centred at 40 % of the icon, outer radius
    /// 27.5 %, stroke 10.5 %) at `angle_deg` (screen coordinates: clockwise from the
    /// right), in the middle of the stroke.
    fn on_ring(angle_deg: f64) -> (u32, u32) {
        let s = f64::from(SIZE);
        let (cx, cy) = (0.40 * s, 0.40 * s);
        let r = 0.275 * s - 0.105 * s / 2.0;
        let a = angle_deg.to_radians();
        (
            (cx + r * a.cos()).floor() as u32,
            (cy + r * a.sin()).floor() as u32,
        )
    }

    #[test]
    fn decodes_to_256_square_rgba() {
        let icon = window_icon();
        assert_eq!((icon.width, icon.height), (SIZE, SIZE));
        assert_eq!(icon.rgba.len(), (SIZE * SIZE * 4) as usize);
    }

    #[test]
    fn corners_are_transparent_or_dark() {
        let icon = window_icon();
        for (x, y) in [(0, 0), (SIZE - 1, 0), (0, SIZE - 1), (SIZE - 1, SIZE - 1)] {
            let [r, g, b, a] = pixel(&icon, x, y);
            assert!(
                a == 0 || r.max(g).max(b) < 64,
                "corner ({x}, {y}) is {:?}",
                [r, g, b, a]
            );
        }
    }

    #[test]
    fn the_ring_is_opaque_blue_with_an_amber_head() {
        let icon = window_icon();
        // Segments that are neither the head (top-right) nor the one behind it (top):
        // the calm blue.
        for angle in [0.0, 90.0, 180.0] {
            let (x, y) = on_ring(angle);
            let [r, g, b, a] = pixel(&icon, x, y);
            assert_eq!(a, 255, "ring at {angle}° ({x}, {y}) is not opaque");
            assert!(
                b > 180 && b > r + 80 && g > r,
                "ring at {angle}° ({x}, {y}) is {:?}, not blue",
                [r, g, b, a]
            );
        }
        // The head: amber.
        let (x, y) = on_ring(-45.0);
        let [r, g, b, a] = pixel(&icon, x, y);
        assert_eq!(a, 255);
        assert!(
            r > 220 && g > 120 && b < 80,
            "head ({x}, {y}) is {:?}",
            [r, g, b, a]
        );
    }

    #[test]
    fn the_lens_and_the_background_are_dark_and_opaque() {
        let icon = window_icon();
        // The glass (centre of the lens) and the background left of the handle's end.
        for (x, y) in [(102, 102), (40, 220)] {
            let [r, g, b, a] = pixel(&icon, x, y);
            assert_eq!(a, 255, "({x}, {y}) is not opaque");
            assert!(r.max(g).max(b) < 80, "({x}, {y}) is {:?}", [r, g, b, a]);
        }
    }
}
