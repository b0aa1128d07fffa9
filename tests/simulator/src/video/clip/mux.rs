//! Packs the H.264 frames into an MP4 file with the `mp4` crate.

use std::io::Cursor;

use bytes::Bytes;
use mp4::{
    AvcConfig, FourCC, MediaConfig, Mp4Config, Mp4Sample, Mp4Writer, TrackConfig, TrackType,
};

use super::h264::Frame;
use super::picture::Geometry;

/// Ticks per second of the movie and the track; 1000 makes every frame
/// duration at the clip's frame rates a whole number.
const TIMESCALE: u32 = 1000;

fn brand(name: &[u8; 4]) -> FourCC {
    FourCC::from(*name)
}

/// Frames of `1000 / frame_ms` fps each lasting `frame_ms`; `sps` and `pps`
/// are NAL units without start codes.
pub fn mux(
    geometry: Geometry,
    sps: Vec<u8>,
    pps: Vec<u8>,
    frames: impl IntoIterator<Item = Frame>,
    frame_ms: u32,
) -> mp4::Result<Vec<u8>> {
    let config = Mp4Config {
        major_brand: brand(b"isom"),
        minor_version: 512,
        compatible_brands: vec![
            brand(b"isom"),
            brand(b"iso2"),
            brand(b"avc1"),
            brand(b"mp41"),
        ],
        timescale: TIMESCALE,
    };
    let mut writer = Mp4Writer::write_start(Cursor::new(Vec::new()), &config)?;
    writer.add_track(&TrackConfig {
        track_type: TrackType::Video,
        timescale: TIMESCALE,
        language: "und".to_owned(),
        media_conf: MediaConfig::AvcConfig(AvcConfig {
            width: geometry.width,
            height: geometry.height,
            seq_param_set: sps,
            pic_param_set: pps,
        }),
    })?;
    for (index, frame) in frames.into_iter().enumerate() {
        // MP4 samples carry NAL units behind a 4-byte big-endian length.
        let mut sample = Vec::with_capacity(frame.nal.len() + 4);
        let len = u32::try_from(frame.nal.len())
            .map_err(|_| mp4::Error::InvalidData("frame too large"))?;
        sample.extend_from_slice(&len.to_be_bytes());
        sample.extend_from_slice(&frame.nal);
        writer.write_sample(
            1,
            &Mp4Sample {
                start_time: index as u64 * u64::from(frame_ms),
                duration: frame_ms,
                rendering_offset: 0,
                is_sync: frame.sync,
                bytes: Bytes::from(sample),
            },
        )?;
    }
    writer.write_end()?;
    Ok(writer.into_writer().into_inner())
}
