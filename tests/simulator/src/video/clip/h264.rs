//! The clip's H.264 stream (Constrained Baseline, CAVLC, one slice a frame).
//!
//! `less-avc` encodes the first frame: an IDR picture of lossless `I_PCM`
//! macroblocks, plus the PPS and the NAL unit framing. It only writes
//! intra-only streams, which at a few frames a second would cost ~23 KB per
//! frame, so the frames after it are P pictures written here: unchanged
//! macroblocks are `P_Skip` (copied from the previous frame) and changed
//! ones are `I_PCM` again. Every picture is therefore reproduced exactly,
//! and a 30 s clip of 160x90 frames is under 100 KB. The SPS is written
//! here as well, because `less-avc`'s allows no reference frames; it keeps
//! every field the IDR slice header depends on (4-bit `frame_num`, POC type
//! 0 with a 4-bit LSB, PPS 0) as `less-avc` has them.
//!
//! Deblocking stays on (the PPS cannot turn it off) but never changes a
//! sample: `I_PCM` macroblocks have QP 0, and the filter thresholds are zero
//! below an average QP of 16; between skipped macroblocks nothing differs.

use less_avc::nal_unit::{NalRefIdc, NalUnit, NalUnitType};
use less_avc::ycbcr_image::{DataPlane, Planes, YCbCrImage};
use less_avc::{BitDepth, LessEncoder, RbspData};

use super::bits::BitWriter;
use super::picture::{Geometry, Picture};

/// `frame_num` and the POC LSB are 4-bit fields (the `less-avc` SPS values).
const FRAME_NUM_MODULO: usize = 16;
/// `mb_type` of `I_PCM` in a P slice (5 + its I-slice value 25).
const P_SLICE_I_PCM: u32 = 30;
/// `slice_type` 5: P, and every slice of the picture is P.
const SLICE_TYPE_P: u32 = 5;
const PROFILE_BASELINE: u8 = 66;
/// constraint_set0 and constraint_set1: Constrained Baseline.
const CONSTRAINED: u8 = 0b1100_0000;
/// Level 2.0 covers 396 macroblocks a frame; ours have at most 100.
const LEVEL: u8 = 20;

/// Encodes pictures one by one into NAL units (without start codes).
pub struct Encoder {
    less: Option<LessEncoder>,
    pps: Vec<u8>,
    previous: Option<Picture>,
    /// Frames since the IDR picture.
    count: usize,
}

/// One encoded picture.
pub struct Frame {
    /// The slice NAL unit, header byte included, without length or start code.
    pub nal: Vec<u8>,
    /// Whether decoding can start here (the IDR picture).
    pub sync: bool,
}

impl Encoder {
    pub fn new() -> Self {
        Self {
            less: None,
            pps: Vec::new(),
            previous: None,
            count: 0,
        }
    }

    /// The PPS NAL unit; empty until the first frame is encoded.
    pub fn pps(&self) -> &[u8] {
        &self.pps
    }

    pub fn encode(&mut self, picture: Picture) -> Result<Frame, less_avc::Error> {
        let frame = match (&mut self.less, &self.previous) {
            (Some(_), Some(previous)) => Frame {
                nal: nal(
                    NalRefIdc::One,
                    NalUnitType::CodedSliceOfANonIDRPicture,
                    p_slice(&picture, previous, self.count),
                ),
                sync: false,
            },
            _ => {
                let (initial, less) = LessEncoder::new(&image(&picture))?;
                self.pps = initial.pps.to_nal_unit();
                self.less = Some(less);
                Frame {
                    nal: initial.frame.to_nal_unit(),
                    sync: true,
                }
            }
        };
        self.previous = Some(picture);
        self.count += 1;
        Ok(frame)
    }
}

fn image(picture: &Picture) -> YCbCrImage<'_> {
    let plane = |data, stride| DataPlane {
        data,
        stride,
        bit_depth: BitDepth::Depth8,
    };
    YCbCrImage {
        planes: Planes::YCbCr((
            plane(&picture.luma, picture.luma_stride()),
            plane(&picture.cb, picture.chroma_stride()),
            plane(&picture.cr, picture.chroma_stride()),
        )),
        width: u32::from(picture.geometry.width),
        height: u32::from(picture.geometry.height),
    }
}

fn nal(ref_idc: NalRefIdc, unit_type: NalUnitType, rbsp: Vec<u8>) -> Vec<u8> {
    // less-avc adds the header byte and the emulation-prevention bytes.
    NalUnit::new(ref_idc, unit_type, RbspData { data: rbsp }).to_nal_unit()
}

/// The SPS NAL unit for frames of `geometry`, allowing one reference frame.
pub fn sps(geometry: Geometry) -> Vec<u8> {
    let mut w = BitWriter::default();
    w.bits(8, PROFILE_BASELINE.into());
    w.bits(8, CONSTRAINED.into());
    w.bits(8, LEVEL.into());
    w.ue(0); // seq_parameter_set_id
    w.ue(0); // log2_max_frame_num_minus4
    w.ue(0); // pic_order_cnt_type
    w.ue(0); // log2_max_pic_order_cnt_lsb_minus4
    w.ue(1); // max_num_ref_frames
    w.flag(false); // gaps_in_frame_num_value_allowed_flag
    w.ue(count(geometry.mbs_wide()) - 1);
    w.ue(count(geometry.mbs_high()) - 1);
    w.flag(true); // frame_mbs_only_flag
    w.flag(true); // direct_8x8_inference_flag
                  // Cropping counts chroma samples (2 luma samples in 4:2:0).
    let crop_right = (geometry.coded_width() - usize::from(geometry.width)) / 2;
    let crop_bottom = (geometry.coded_height() - usize::from(geometry.height)) / 2;
    let cropped = crop_right > 0 || crop_bottom > 0;
    w.flag(cropped);
    if cropped {
        w.ue(0);
        w.ue(count(crop_right));
        w.ue(0);
        w.ue(count(crop_bottom));
    }
    w.flag(true); // vui_parameters_present_flag
    vui(&mut w);
    nal(
        NalRefIdc::Three,
        NalUnitType::SequenceParameterSet,
        w.finish(),
    )
}

/// VUI that only tells decoders frames come out in decoding order, so they
/// need not hold any back.
fn vui(w: &mut BitWriter) {
    w.flag(false); // aspect_ratio_info_present_flag
    w.flag(false); // overscan_info_present_flag
    w.flag(false); // video_signal_type_present_flag
    w.flag(false); // chroma_loc_info_present_flag
    w.flag(false); // timing_info_present_flag
    w.flag(false); // nal_hrd_parameters_present_flag
    w.flag(false); // vcl_hrd_parameters_present_flag
    w.flag(false); // pic_struct_present_flag
    w.flag(true); // bitstream_restriction_flag
    w.flag(true); // motion_vectors_over_pic_boundaries_flag
    w.ue(0); // max_bytes_per_pic_denom
    w.ue(0); // max_bits_per_mb_denom
    w.ue(16); // log2_max_mv_length_horizontal
    w.ue(16); // log2_max_mv_length_vertical
    w.ue(0); // max_num_reorder_frames
    w.ue(1); // max_dec_frame_buffering
}

/// Macroblock counts are at most MAX_SIDE / 16; the cast cannot truncate.
fn count(n: usize) -> u32 {
    n as u32
}

/// A P slice for frame `index` after the IDR picture: every reference frame
/// advances `frame_num` by one and the POC by two.
fn p_slice(picture: &Picture, previous: &Picture, index: usize) -> Vec<u8> {
    let mut w = BitWriter::default();
    w.ue(0); // first_mb_in_slice
    w.ue(SLICE_TYPE_P);
    w.ue(0); // pic_parameter_set_id
    w.bits(4, (index % FRAME_NUM_MODULO) as u64);
    w.bits(4, ((2 * index) % FRAME_NUM_MODULO) as u64); // pic_order_cnt_lsb
    w.flag(false); // num_ref_idx_active_override_flag
    w.flag(false); // ref_pic_list_modification_flag_l0
    w.flag(false); // adaptive_ref_pic_marking_mode_flag
    w.se(0); // slice_qp_delta

    let geometry = picture.geometry;
    let mut skipped = 0;
    for mb_y in 0..geometry.mbs_high() {
        for mb_x in 0..geometry.mbs_wide() {
            let samples = picture.macroblock(mb_x, mb_y);
            if samples == previous.macroblock(mb_x, mb_y) {
                skipped += 1;
                continue;
            }
            w.ue(skipped); // mb_skip_run
            skipped = 0;
            w.ue(P_SLICE_I_PCM);
            w.align_zero();
            w.bytes(&samples);
        }
    }
    // After a coded last macroblock the slice simply ends; otherwise the
    // final skip run reaches the end of the picture.
    if skipped > 0 {
        w.ue(skipped);
    }
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(n: usize) -> Vec<Frame> {
        let g = Geometry::for_request(1280, 720);
        let mut enc = Encoder::new();
        (0..n)
            .map(|i| enc.encode(Picture::render(g, i, n)).expect("encode"))
            .collect()
    }

    #[test]
    fn first_frame_is_idr_and_the_rest_are_small_p_frames() {
        let out = frames(8);
        assert!(out[0].sync);
        assert_eq!(out[0].nal[0] & 0x1f, 5);
        // 60 macroblocks of 384 samples.
        assert!(out[0].nal.len() > 60 * 384);
        for f in &out[1..] {
            assert!(!f.sync);
            assert_eq!(f.nal[0], 0x21); // nal_ref_idc 1, type 1
            assert!(f.nal.len() < 4 * 400, "P frame of {} bytes", f.nal.len());
        }
    }

    #[test]
    fn sps_describes_the_cropped_frame() {
        let sps = sps(Geometry::for_request(1280, 720));
        assert_eq!(&sps[..4], &[0x67, PROFILE_BASELINE, CONSTRAINED, LEVEL]);
    }

    #[test]
    fn unchanged_frames_are_all_skip() {
        let g = Geometry::for_request(1280, 720);
        let p = Picture::render(g, 3, 8);
        let rbsp = p_slice(&p, &p, 1);
        // Header plus one skip run of 60 and the stop bit: a few bytes.
        assert!(rbsp.len() < 8, "{rbsp:?}");
    }
}
