//! Camera images of the simulated envs: each env's cart-pole drawn from its state over a
//! background tinted by the env index, so images move and differ between envs.

use super::dynamics::{CartPoles, X_LIMIT};

fn tint(env: usize) -> [u8; 3] {
    // Spread hues around the colour wheel.
    let h = (env as f32 * 0.618_034).fract() * 6.0;
    let f = h.fract();
    let (r, g, b) = match h as u32 {
        0 => (1.0, f, 0.0),
        1 => (1.0 - f, 1.0, 0.0),
        2 => (0.0, 1.0, f),
        3 => (0.0, 1.0 - f, 1.0),
        4 => (f, 0.0, 1.0),
        _ => (1.0, 0.0, 1.0 - f),
    };
    [
        (40.0 + 60.0 * r) as u8,
        (40.0 + 60.0 * g) as u8,
        (40.0 + 60.0 * b) as u8,
    ]
}

/// The bytes of one pixel of `c` channels (1: grey, 3: RGB, 4: RGBA, opaque).
fn pixel(c: usize, rgb: [u8; 3]) -> [u8; 4] {
    match c {
        1 => [
            ((u16::from(rgb[0]) + u16::from(rgb[1]) + u16::from(rgb[2])) / 3) as u8,
            0,
            0,
            0,
        ],
        _ => [rgb[0], rgb[1], rgb[2], 255],
    }
}

/// Fills `row` with copies of `px`: the first written, then the filled part copied
/// after itself until the row is full (a few block copies instead of one per pixel).
fn fill_row(row: &mut [u8], px: &[u8]) {
    let c = px.len();
    if c == 0 || row.len() < c {
        return;
    }
    row[..c].copy_from_slice(px);
    let mut filled = c;
    while filled < row.len() {
        let n = filled.min(row.len() - filled);
        row.copy_within(..n, filled);
        filled += n;
    }
}

fn put(img: &mut [u8], w: usize, h: usize, c: usize, x: i32, y: i32, rgb: [u8; 3]) {
    if x < 0 || y < 0 || x as usize >= w || y as usize >= h {
        return;
    }
    let at = (y as usize * w + x as usize) * c;
    if let Some(px) = img.get_mut(at..at + c) {
        px.copy_from_slice(&pixel(c, rgb)[..c]);
    }
}

/// The background colour of row `y` of env `env`'s image (`h` rows): the cart and pole
/// never reach the top rows, so these pixels identify an env's image.
pub fn background(env: usize, y: usize, h: usize) -> [u8; 3] {
    let bg = tint(env);
    let shade = (y * 40 / h.max(1)) as u8;
    [
        bg[0].saturating_add(shade),
        bg[1].saturating_add(shade),
        bg[2].saturating_add(shade),
    ]
}

/// Draws env `env` into `img` (`w * h * c` bytes, HWC, top row first).
pub fn render_env(s: &CartPoles, env: usize, img: &mut [u8], w: usize, h: usize, c: usize) {
    // The background a row at a time: one pixel's bytes copied across it (rendering
    // happens inside the engine's step, so it has to be quick).
    for (y, row) in img.chunks_exact_mut(w * c).take(h).enumerate() {
        let px = pixel(c, background(env, y, h));
        fill_row(row, &px[..c.min(4)]);
    }
    let (wf, hf) = (w as f32, h as f32);
    let to_px = |x: f32| ((x / X_LIMIT * 0.45 + 0.5) * wf) as i32;
    let ground = (hf * 0.75) as i32;
    for x in 0..w as i32 {
        put(img, w, h, c, x, ground, [200, 200, 200]);
    }
    // Goal marker.
    let gx = to_px(s.goal[env]);
    for y in ground - 3..=ground + 3 {
        put(img, w, h, c, gx, y, [255, 215, 0]);
    }
    // Cart.
    let cx = to_px(s.x[env]);
    let (half_w, cart_h) = ((wf * 0.08).max(2.0) as i32, (hf * 0.06).max(2.0) as i32);
    let cart_colour = if s.done[env] != 0 {
        [230, 60, 60]
    } else {
        [240, 240, 240]
    };
    for y in ground - cart_h..ground {
        for x in cx - half_w..=cx + half_w {
            put(img, w, h, c, x, y, cart_colour);
        }
    }
    // Pole.
    let len = hf * 0.45;
    let (sin, cos) = s.theta[env].sin_cos();
    let top = (ground - cart_h) as f32;
    let steps = len as i32 * 2;
    for k in 0..=steps {
        let t = k as f32 / steps.max(1) as f32;
        let px = cx as f32 + sin * len * t;
        let py = top - cos * len * t;
        put(img, w, h, c, px as i32, py as i32, [255, 140, 40]);
        put(img, w, h, c, px as i32 + 1, py as i32, [255, 140, 40]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_differ_between_envs_and_move_with_the_state() {
        let mut s = CartPoles::new(2, 8, 1, 1);
        let (w, h, c) = (32, 24, 3);
        let mut a = vec![0u8; w * h * c];
        let mut b = a.clone();
        render_env(&s, 0, &mut a, w, h, c);
        render_env(&s, 1, &mut b, w, h, c);
        assert_ne!(a, b, "envs differ");
        let before = a.clone();
        s.x[0] += 1.0;
        render_env(&s, 0, &mut a, w, h, c);
        assert_ne!(a, before, "the image moves with the cart");
    }

    #[test]
    fn every_pixel_of_the_top_row_is_the_background_in_every_channel_count() {
        let s = CartPoles::new(3, 8, 1, 1);
        let (w, h) = (37, 20);
        for c in [1usize, 3, 4] {
            let mut img = vec![0u8; w * h * c];
            render_env(&s, 2, &mut img, w, h, c);
            let want = pixel(c, background(2, 0, h));
            for x in 0..w {
                assert_eq!(img[x * c..(x + 1) * c], want[..c], "channels {c}, x {x}");
            }
            let last_row = &img[(h - 1) * w * c..];
            let bottom = pixel(c, background(2, h - 1, h));
            assert!(
                last_row.chunks_exact(c).all(|p| p == &bottom[..c]),
                "channels {c}"
            );
        }
    }
}
