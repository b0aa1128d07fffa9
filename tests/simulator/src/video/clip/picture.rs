//! What the clip shows: colour bars above a progress bar that fills as the
//! clip plays, so a person opening the file sees it is a real video of the
//! requested length. Limited-range YCbCr 4:2:0, padded to whole macroblocks.

/// Macroblock side in luma samples.
pub const MB: usize = 16;

/// Longest side of the encoded frames: small keeps the files small, and the
/// picture only has to prove the file plays.
pub const MAX_SIDE: u32 = 160;

/// The visible frame size. Both sides are even (4:2:0 chroma) and at most
/// [`MAX_SIDE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Geometry {
    pub width: u16,
    pub height: u16,
}

impl Geometry {
    /// The requested frame size scaled down to fit [`MAX_SIDE`], so the file
    /// keeps the request's aspect (160x90 for 1280x720, 90x160 for 720x1280).
    pub fn for_request(width: u32, height: u32) -> Self {
        let (w, h) = (u64::from(width.max(1)), u64::from(height.max(1)));
        let max = u64::from(MAX_SIDE);
        let (w, h) = if w >= h {
            (max, nearest_even(max * h, w))
        } else {
            (nearest_even(max * w, h), max)
        };
        // Both values are at most MAX_SIDE, well inside u16.
        Self {
            width: w as u16,
            height: h as u16,
        }
    }

    pub fn mbs_wide(self) -> usize {
        usize::from(self.width).div_ceil(MB)
    }

    pub fn mbs_high(self) -> usize {
        usize::from(self.height).div_ceil(MB)
    }

    pub fn coded_width(self) -> usize {
        self.mbs_wide() * MB
    }

    pub fn coded_height(self) -> usize {
        self.mbs_high() * MB
    }
}

/// `num / den` rounded to the nearest even number, at least one macroblock.
fn nearest_even(num: u64, den: u64) -> u64 {
    let halves = (num + den) / (2 * den);
    (halves * 2).max(MB as u64)
}

/// One YCbCr colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Colour {
    y: u8,
    cb: u8,
    cr: u8,
}

const fn colour(y: u8, cb: u8, cr: u8) -> Colour {
    Colour { y, cb, cr }
}

/// The usual 75% colour bars (BT.601, limited range).
const BARS: [Colour; 7] = [
    colour(180, 128, 128),
    colour(162, 44, 142),
    colour(131, 156, 44),
    colour(112, 72, 58),
    colour(84, 184, 198),
    colour(65, 100, 212),
    colour(35, 212, 114),
];
const BAND: Colour = colour(40, 128, 128);
const PROGRESS: Colour = colour(220, 128, 128);

/// One frame at macroblock-padded size; the padding repeats the edge pixels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Picture {
    pub geometry: Geometry,
    pub luma: Vec<u8>,
    pub cb: Vec<u8>,
    pub cr: Vec<u8>,
}

impl Picture {
    /// Frame `index` of `frames`: the progress bar covers `(index + 1) /
    /// frames` of the width.
    pub fn render(geometry: Geometry, index: usize, frames: usize) -> Self {
        let layout = Layout::new(geometry, index, frames);
        let (cw, ch) = (geometry.coded_width(), geometry.coded_height());
        let mut luma = Vec::with_capacity(cw * ch);
        for y in 0..ch {
            for x in 0..cw {
                luma.push(layout.at(x, y).y);
            }
        }
        let (cw2, ch2) = (cw / 2, ch / 2);
        let mut cb = Vec::with_capacity(cw2 * ch2);
        let mut cr = Vec::with_capacity(cw2 * ch2);
        for y in 0..ch2 {
            for x in 0..cw2 {
                let c = layout.at(2 * x, 2 * y);
                cb.push(c.cb);
                cr.push(c.cr);
            }
        }
        Self {
            geometry,
            luma,
            cb,
            cr,
        }
    }

    pub fn luma_stride(&self) -> usize {
        self.geometry.coded_width()
    }

    pub fn chroma_stride(&self) -> usize {
        self.geometry.coded_width() / 2
    }

    /// The samples of one macroblock in `I_PCM` order: 16x16 luma, then 8x8
    /// Cb, then 8x8 Cr, each row by row.
    pub fn macroblock(&self, mb_x: usize, mb_y: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(MB * MB * 3 / 2);
        copy_block(&self.luma, self.luma_stride(), mb_x, mb_y, MB, &mut out);
        copy_block(&self.cb, self.chroma_stride(), mb_x, mb_y, MB / 2, &mut out);
        copy_block(&self.cr, self.chroma_stride(), mb_x, mb_y, MB / 2, &mut out);
        out
    }
}

fn copy_block(plane: &[u8], stride: usize, bx: usize, by: usize, side: usize, out: &mut Vec<u8>) {
    for row in by * side..(by + 1) * side {
        let start = row * stride + bx * side;
        out.extend_from_slice(&plane[start..start + side]);
    }
}

/// Where things are in one frame, in visible luma coordinates.
struct Layout {
    width: usize,
    height: usize,
    band_top: usize,
    bar_rows: std::ops::Range<usize>,
    bar_end: usize,
}

impl Layout {
    fn new(geometry: Geometry, index: usize, frames: usize) -> Self {
        let width = usize::from(geometry.width);
        let height = usize::from(geometry.height);
        let band_top = even(height * 3 / 4);
        let frames = frames.max(1);
        Self {
            width,
            height,
            band_top,
            bar_rows: even(band_top + 4)..even(height.saturating_sub(4)),
            // Even, so luma and chroma edges agree.
            bar_end: even(width * (index.min(frames - 1) + 1) / frames),
        }
    }

    /// The colour at (`x`, `y`); padding outside the visible frame repeats
    /// the nearest edge.
    fn at(&self, x: usize, y: usize) -> Colour {
        let x = x.min(self.width - 1);
        let y = y.min(self.height - 1);
        if y < self.band_top {
            BARS[x * BARS.len() / self.width]
        } else if self.bar_rows.contains(&y) && x < self.bar_end {
            PROGRESS
        } else {
            BAND
        }
    }
}

fn even(n: usize) -> usize {
    n & !1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requested_sizes_keep_their_aspect() {
        let g = |w, h| {
            let g = Geometry::for_request(w, h);
            (g.width, g.height)
        };
        assert_eq!(g(1280, 720), (160, 90));
        assert_eq!(g(1920, 1080), (160, 90));
        assert_eq!(g(720, 1280), (90, 160));
        assert_eq!(g(1024, 1024), (160, 160));
        assert_eq!(g(4000, 10), (160, 16));
        assert_eq!(g(0, 0), (160, 160));
    }

    #[test]
    fn padding_and_planes_have_macroblock_sizes() {
        let g = Geometry::for_request(1280, 720);
        assert_eq!((g.coded_width(), g.coded_height()), (160, 96));
        let p = Picture::render(g, 0, 4);
        assert_eq!(p.luma.len(), 160 * 96);
        assert_eq!(p.cb.len(), 80 * 48);
        assert_eq!(p.macroblock(9, 5).len(), 384);
        // No zero samples: early decoders treat them as invalid PCM.
        assert!(p.luma.iter().chain(&p.cb).chain(&p.cr).all(|&s| s > 0));
    }

    #[test]
    fn the_progress_bar_grows_and_ends_full() {
        let g = Geometry::for_request(1280, 720);
        let first = Picture::render(g, 0, 8);
        let last = Picture::render(g, 7, 8);
        let row = 80 * 160; // inside the bar rows of a 90-high frame
        let lit = |p: &Picture| p.luma[row..row + 160].iter().filter(|&&y| y == 220).count();
        assert_eq!(lit(&first), 20);
        assert_eq!(lit(&last), 160);
        assert_eq!(first.macroblock(0, 0), last.macroblock(0, 0));
        assert_ne!(first.macroblock(9, 4), last.macroblock(9, 4));
    }
}
