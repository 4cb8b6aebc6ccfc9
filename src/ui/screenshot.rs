//! Camera screenshots: one env, every env as separate files, or the grid as one image,
//! written as PNG.

use std::path::{Path, PathBuf};

use lrbc_live::sampler::ImageFrame;

/// What to capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shot {
    Env(u32),
    AllEnvs,
    Grid,
}

/// One env's image as RGBA.
pub fn env_image(f: &ImageFrame, env: u32) -> Option<image::RgbaImage> {
    if env >= f.num_envs {
        return None;
    }
    let (w, h, c) = (f.width as usize, f.height as usize, f.channels as usize);
    let per = w * h * c;
    let px = f.pixels.get(env as usize * per..(env as usize + 1) * per)?;
    let mut img = image::RgbaImage::new(f.width, f.height);
    for (i, out) in img.pixels_mut().enumerate() {
        let p = &px[i * c..i * c + c];
        *out = match c {
            1 => image::Rgba([p[0], p[0], p[0], 255]),
            3 => image::Rgba([p[0], p[1], p[2], 255]),
            _ => image::Rgba([p[0], p[1], p[2], p[3]]),
        };
    }
    Some(img)
}

/// Every env's image in a grid of `columns` columns, 2-pixel gaps.
pub fn grid_image(f: &ImageFrame, columns: u32) -> image::RgbaImage {
    let columns = columns.clamp(1, f.num_envs.max(1));
    let rows = f.num_envs.div_ceil(columns).max(1);
    let gap = 2;
    let (w, h) = (f.width + gap, f.height + gap);
    let mut out = image::RgbaImage::from_pixel(
        columns * w + gap,
        rows * h + gap,
        image::Rgba([20, 20, 20, 255]),
    );
    for env in 0..f.num_envs {
        if let Some(img) = env_image(f, env) {
            let (x, y) = (gap + (env % columns) * w, gap + (env / columns) * h);
            image::imageops::replace(&mut out, &img, i64::from(x), i64::from(y));
        }
    }
    out
}

fn file_stem(label: &str, f: &ImageFrame) -> String {
    let clean: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{clean}_frame{}", f.frame_seq)
}

/// Writes the capture into `dir` (created if needed); returns the files written.
pub fn quick_save(
    f: &ImageFrame,
    shot: Shot,
    dir: &Path,
    label: &str,
    columns: u32,
) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let stem = file_stem(label, f);
    let save = |img: &image::RgbaImage, path: PathBuf| -> Result<PathBuf, String> {
        img.save_with_format(&path, image::ImageFormat::Png)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        Ok(path)
    };
    match shot {
        Shot::Env(env) => {
            let img = env_image(f, env).ok_or_else(|| format!("env {env} has no image"))?;
            Ok(vec![save(
                &img,
                dir.join(format!("{stem}_env{env:04}.png")),
            )?])
        }
        Shot::AllEnvs => (0..f.num_envs)
            .map(|env| {
                let img = env_image(f, env).ok_or_else(|| format!("env {env} has no image"))?;
                save(&img, dir.join(format!("{stem}_env{env:04}.png")))
            })
            .collect(),
        Shot::Grid => Ok(vec![save(
            &grid_image(f, columns),
            dir.join(format!("{stem}_grid.png")),
        )?]),
    }
}

/// Writes one image to `path` (from a save dialog).
pub fn save_to(
    f: &ImageFrame,
    shot: Shot,
    path: &Path,
    columns: u32,
) -> Result<Vec<PathBuf>, String> {
    match shot {
        Shot::AllEnvs => {
            let dir = if path.extension().is_some() {
                path.parent().map(Path::to_path_buf).unwrap_or_default()
            } else {
                path.to_path_buf()
            };
            quick_save(f, Shot::AllEnvs, &dir, "", columns)
        }
        Shot::Env(env) => {
            let img = env_image(f, env).ok_or_else(|| format!("env {env} has no image"))?;
            img.save_with_format(path, image::ImageFormat::Png)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(vec![path.to_path_buf()])
        }
        Shot::Grid => {
            grid_image(f, columns)
                .save_with_format(path, image::ImageFormat::Png)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(vec![path.to_path_buf()])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn frame() -> ImageFrame {
        // Two 3×2 RGB envs: env 0 red ramp, env 1 solid blue.
        let mut px = Vec::new();
        for i in 0..6u8 {
            px.extend([i * 40, 0, 0]);
        }
        for _ in 0..6 {
            px.extend([0, 0, 200]);
        }
        ImageFrame {
            image_seq: 3,
            frame_seq: 77,
            width: 3,
            height: 2,
            channels: 3,
            num_envs: 2,
            pixels: Arc::new(px),
            captured_ns: 0,
            consistent: true,
        }
    }

    #[test]
    fn each_shot_writes_pngs_with_the_env_pixels() {
        let dir = std::env::temp_dir().join(format!("lrbc-shots-{}", std::process::id()));
        let f = frame();
        let one = quick_save(&f, Shot::Env(0), &dir, "seg/1", 2).unwrap();
        assert_eq!(one.len(), 1);
        assert!(
            one[0]
                .file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with("seg_1_frame77_env0000")
        );
        let img = image::open(&one[0]).unwrap().to_rgba8();
        assert_eq!(img.dimensions(), (3, 2));
        assert_eq!(img.get_pixel(2, 1).0, [200, 0, 0, 255]);
        let all = quick_save(&f, Shot::AllEnvs, &dir, "seg", 2).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(
            image::open(&all[1]).unwrap().to_rgba8().get_pixel(0, 0).0,
            [0, 0, 200, 255]
        );
        let grid = quick_save(&f, Shot::Grid, &dir, "seg", 2).unwrap();
        let g = image::open(&grid[0]).unwrap().to_rgba8();
        assert_eq!(g.dimensions(), (2 * 5 + 2, 4 + 2));
        assert_eq!(
            g.get_pixel(2 + 5, 2).0,
            [0, 0, 200, 255],
            "env 1 in the second column"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
