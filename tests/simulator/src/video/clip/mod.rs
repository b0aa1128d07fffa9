//! The MP4 a finished task serves: H.264 at [`FPS`] frames a second, as long
//! as the task asked for, generated in memory and cached per (seconds, frame
//! size). Same inputs, same bytes.

mod bits;
mod h264;
mod mux;
mod picture;

use std::collections::BTreeMap;
use std::sync::Mutex;

use anyhow::Context as _;
use bytes::Bytes;

use crate::faults::lock;
pub use picture::Geometry;

/// Frames a second: few keep the file small; 4 still shows motion.
pub const FPS: u32 = 4;

/// Distinct clips kept; a long demo with many sizes must not grow memory
/// without bound.
const MAX_CACHED: usize = 64;

/// Renders a `seconds`-long clip of `geometry`-sized frames.
pub fn render(seconds: u32, geometry: Geometry) -> anyhow::Result<Bytes> {
    let frames = usize::try_from(seconds.saturating_mul(FPS)).context("clip too long")?;
    let mut encoder = h264::Encoder::new();
    let mut encoded = Vec::with_capacity(frames);
    for index in 0..frames {
        let picture = picture::Picture::render(geometry, index, frames);
        encoded.push(encoder.encode(picture).context("encoding a frame")?);
    }
    let file = mux::mux(
        geometry,
        h264::sps(geometry),
        encoder.pps().to_vec(),
        encoded,
        1000 / FPS,
    )
    .context("writing the MP4")?;
    Ok(Bytes::from(file))
}

/// Rendered clips by (seconds, geometry).
#[derive(Default)]
pub struct ClipCache {
    clips: Mutex<BTreeMap<(u32, Geometry), Bytes>>,
}

impl ClipCache {
    /// The clip, rendered on first use. Rendering takes milliseconds, so it
    /// happens under the lock: concurrent first downloads wait rather than
    /// render twice.
    pub fn get(&self, seconds: u32, geometry: Geometry) -> anyhow::Result<Bytes> {
        let mut clips = lock(&self.clips);
        if let Some(clip) = clips.get(&(seconds, geometry)) {
            return Ok(clip.clone());
        }
        let clip = render(seconds, geometry)?;
        if clips.len() >= MAX_CACHED {
            clips.pop_first();
        }
        clips.insert((seconds, geometry), clip.clone());
        Ok(clip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clips_are_deterministic_and_cached() {
        let g = Geometry::for_request(1280, 720);
        let a = render(2, g).expect("render");
        let b = render(2, g).expect("render");
        assert_eq!(a, b);
        assert_eq!(&a[4..8], b"ftyp");
        let cache = ClipCache::default();
        let c = cache.get(2, g).expect("cached");
        assert_eq!(a, c);
        assert!(render(3, g).expect("render").len() > a.len());
    }

    /// The P frames written by hand must decode to exactly the pictures
    /// rendered. Needs ffmpeg; skipped with a notice without it.
    #[test]
    fn ffmpeg_decodes_every_frame_exactly() {
        let g = Geometry::for_request(720, 1280);
        let seconds = 3;
        let clip = render(seconds, g).expect("render");
        let path =
            std::env::temp_dir().join(format!("upstream-sim-exact-{}.mp4", std::process::id()));
        std::fs::write(&path, &clip).expect("write temp file");
        let decoded = std::process::Command::new("ffmpeg")
            .args(["-v", "error", "-i"])
            .arg(&path)
            .args(["-f", "rawvideo", "-pix_fmt", "yuv420p", "-"])
            .output();
        let _ = std::fs::remove_file(&path);
        let Ok(decoded) = decoded else {
            eprintln!("NOTICE: ffmpeg is not installed; skipping the exact decode check");
            return;
        };
        assert!(decoded.status.success(), "{decoded:?}");

        let frames = (seconds * FPS) as usize;
        let mut expected = Vec::new();
        let (w, h) = (usize::from(g.width), usize::from(g.height));
        for index in 0..frames {
            let p = picture::Picture::render(g, index, frames);
            for (plane, stride, pw, ph) in [
                (&p.luma, p.luma_stride(), w, h),
                (&p.cb, p.chroma_stride(), w / 2, h / 2),
                (&p.cr, p.chroma_stride(), w / 2, h / 2),
            ] {
                for row in 0..ph {
                    expected.extend_from_slice(&plane[row * stride..row * stride + pw]);
                }
            }
        }
        assert_eq!(decoded.stdout.len(), expected.len());
        assert!(decoded.stdout == expected, "decoded samples differ");
    }
}
