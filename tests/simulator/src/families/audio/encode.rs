//! Silent audio in the six formats of OpenAI's speech API, written by hand
//! from each format's simplest valid frames (no encoder is needed for
//! silence), all mono at 24 kHz like OpenAI's output:
//!
//! - `wav`: RIFF/WAVE, 16-bit PCM; exactly the intended length.
//! - `pcm`: raw 16-bit little-endian samples, no header; exact.
//! - `flac`: `fLaC`, STREAMINFO, 4096-sample frames of one CONSTANT 0
//!   subframe each (CRC-8 header, CRC-16 frame); exact.
//! - `mp3`: MPEG-2 Layer III at 32 kbit/s, 96-byte frames with empty side
//!   info and main data; whole 24 ms frames.
//! - `aac`: ADTS, AAC-LC, 11-byte frames (one empty single channel
//!   element); whole 1024-sample frames (~42.7 ms).
//! - `opus`: Ogg (CRC-32) with OpusHead and OpusTags, then 20 ms CELT
//!   silence packets `F8 FF FE`, 50 per page, the last page's granule
//!   trimming the end; exact (ffprobe adds the 312-sample pre-skip, 6.5 ms).
//!
//! `ffprobe` reads each with the intended duration (the integration test
//! `tests/media.rs` checks it when ffprobe is installed).

/// Samples per second of every format (Opus granules still count at 48 kHz).
pub const SAMPLE_RATE: u32 = 24_000;

/// A speech `response_format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Mp3,
    Opus,
    Aac,
    Flac,
    Wav,
    Pcm,
}

impl Format {
    pub const NAMES: [&'static str; 6] = ["mp3", "opus", "aac", "flac", "wav", "pcm"];

    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "mp3" => Self::Mp3,
            "opus" => Self::Opus,
            "aac" => Self::Aac,
            "flac" => Self::Flac,
            "wav" => Self::Wav,
            "pcm" => Self::Pcm,
            _ => return None,
        })
    }

    /// The `Content-Type` OpenAI sends with it.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Mp3 => "audio/mpeg",
            Self::Opus => "audio/opus",
            Self::Aac => "audio/aac",
            Self::Flac => "audio/flac",
            Self::Wav => "audio/wav",
            Self::Pcm => "audio/pcm",
        }
    }
}

/// `ms` milliseconds of silence in `format`.
pub fn silence(format: Format, ms: u64) -> Vec<u8> {
    let samples = ms * u64::from(SAMPLE_RATE) / 1000;
    match format {
        Format::Wav => wav(samples),
        Format::Pcm => vec![0; (samples * 2) as usize],
        Format::Flac => flac(samples),
        Format::Mp3 => mp3(ms),
        Format::Aac => aac(samples),
        Format::Opus => opus(ms),
    }
}

fn wav(samples: u64) -> Vec<u8> {
    // A RIFF size field has 32 bits; the speech route stays far below.
    let data = u32::try_from(samples * 2).unwrap_or(u32::MAX - 36);
    let mut out = Vec::with_capacity(44 + data as usize);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&(36 + data).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&SAMPLE_RATE.to_le_bytes());
    out.extend_from_slice(&(SAMPLE_RATE * 2).to_le_bytes()); // bytes per second
    out.extend_from_slice(&2u16.to_le_bytes()); // block align
    out.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data.to_le_bytes());
    out.resize(44 + data as usize, 0);
    out
}

/// MPEG-2 Layer III, 24 kHz mono, 32 kbit/s, no CRC: 72 · 32000 / 24000 =
/// 96 bytes and 576 samples (24 ms) per frame. All-zero side info means
/// no main data: every granule decodes to silence.
fn mp3(ms: u64) -> Vec<u8> {
    const FRAME: usize = 96;
    const HEADER: [u8; 4] = [0xff, 0xf3, 0x44, 0xc0];
    let frames = ms.div_ceil(24) as usize;
    let mut out = vec![0; frames * FRAME];
    for frame in out.chunks_exact_mut(FRAME) {
        frame[..4].copy_from_slice(&HEADER);
    }
    out
}

/// ADTS frames of AAC-LC, 24 kHz mono, 1024 samples each. The raw data
/// block is one single channel element with `max_sfb` 0 (no spectral data)
/// followed by the END element: 32 bits, `00 00 00 07`.
fn aac(samples: u64) -> Vec<u8> {
    const PAYLOAD: [u8; 4] = [0x00, 0x00, 0x00, 0x07];
    const LEN: u64 = 7 + PAYLOAD.len() as u64;
    let mut bits = BitWriter::default();
    bits.put(0xfff, 12); // syncword
    bits.put(0, 1); // MPEG-4
    bits.put(0, 2); // layer
    bits.put(1, 1); // protection absent: no CRC
    bits.put(1, 2); // profile: AAC LC (object type 2, minus 1)
    bits.put(6, 4); // sampling frequency index: 24000
    bits.put(0, 1); // private
    bits.put(1, 3); // channel configuration: mono
    bits.put(0, 4); // original, home, copyright id bit and start
    bits.put(LEN, 13); // frame length, header included
    bits.put(0x7ff, 11); // buffer fullness: variable bit rate
    bits.put(0, 2); // one raw data block
    let mut frame = bits.into_bytes();
    frame.extend_from_slice(&PAYLOAD);
    frame.repeat(samples.div_ceil(1024) as usize)
}

/// A native FLAC stream of 16-bit mono silence.
fn flac(samples: u64) -> Vec<u8> {
    const BLOCK: u64 = 4096;
    let mut info = BitWriter::default();
    info.put(BLOCK, 16); // minimum block size (the last may be shorter)
    info.put(BLOCK, 16); // maximum block size
    info.put(0, 24); // minimum frame size: unknown
    info.put(0, 24); // maximum frame size: unknown
    info.put(u64::from(SAMPLE_RATE), 20);
    info.put(0, 3); // channels - 1
    info.put(15, 5); // bits per sample - 1
    info.put(samples, 36);
    let mut info = info.into_bytes();
    info.extend_from_slice(&[0; 16]); // MD5 of the samples: not computed
    let mut out = b"fLaC".to_vec();
    out.push(0x80); // last metadata block, type 0 = STREAMINFO
    out.extend_from_slice(&(info.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&info);
    let mut done = 0;
    let mut number = 0u64;
    while done < samples {
        let n = BLOCK.min(samples - done);
        // Fixed blocking; block size from the 16 bits after the number
        // (0111); 24 kHz (0111); mono (0000); 16 bits (100).
        let mut frame = vec![0xff, 0xf8, 0x77, 0x08];
        frame.extend_from_slice(&utf8_number(number));
        frame.extend_from_slice(&((n - 1) as u16).to_be_bytes());
        frame.push(crc8(&frame));
        // Subframe header: CONSTANT, no wasted bits; then the value 0.
        frame.extend_from_slice(&[0x00, 0x00, 0x00]);
        let crc = crc16(&frame);
        frame.extend_from_slice(&crc.to_be_bytes());
        out.extend_from_slice(&frame);
        done += n;
        number += 1;
    }
    out
}

/// An Ogg Opus stream of `ms` of silence.
fn opus(ms: u64) -> Vec<u8> {
    const PRE_SKIP: u16 = 312;
    const SERIAL: u32 = u32::from_be_bytes(*b"SIM1");
    const PACKETS_PER_PAGE: u64 = 50;
    /// CELT-only, fullband, 20 ms, one frame; the classic silence frame.
    const SILENCE: [u8; 3] = [0xf8, 0xff, 0xfe];
    let mut head = b"OpusHead".to_vec();
    head.extend_from_slice(&[1, 1]); // version, channels
    head.extend_from_slice(&PRE_SKIP.to_le_bytes());
    head.extend_from_slice(&SAMPLE_RATE.to_le_bytes()); // input sample rate
    head.extend_from_slice(&0i16.to_le_bytes()); // output gain
    head.push(0); // channel mapping family
    let vendor = b"upstream-sim";
    let mut tags = b"OpusTags".to_vec();
    tags.extend_from_slice(&(vendor.len() as u32).to_le_bytes());
    tags.extend_from_slice(vendor);
    tags.extend_from_slice(&0u32.to_le_bytes()); // no comments

    let mut out = ogg_page(0x02, 0, SERIAL, 0, &[&head]);
    out.extend(ogg_page(0x00, 0, SERIAL, 1, &[&tags]));
    let packets = ms.div_ceil(20).max(1);
    let end = u64::from(PRE_SKIP) + ms * 48;
    let mut sent = 0;
    let mut sequence = 2;
    while sent < packets {
        let n = PACKETS_PER_PAGE.min(packets - sent);
        sent += n;
        let last = sent == packets;
        let granule = if last {
            end
        } else {
            u64::from(PRE_SKIP) + sent * 960
        };
        let page: Vec<&[u8]> = (0..n).map(|_| &SILENCE[..]).collect();
        out.extend(ogg_page(
            if last { 0x04 } else { 0x00 },
            granule,
            SERIAL,
            sequence,
            &page,
        ));
        sequence += 1;
    }
    out
}

/// One Ogg page holding whole `packets` (each under 255 × 255 bytes).
fn ogg_page(flags: u8, granule: u64, serial: u32, sequence: u32, packets: &[&[u8]]) -> Vec<u8> {
    let mut lacing = Vec::new();
    for p in packets {
        lacing.extend(std::iter::repeat_n(255u8, p.len() / 255));
        lacing.push((p.len() % 255) as u8);
    }
    let mut page = b"OggS".to_vec();
    page.push(0); // version
    page.push(flags);
    page.extend_from_slice(&granule.to_le_bytes());
    page.extend_from_slice(&serial.to_le_bytes());
    page.extend_from_slice(&sequence.to_le_bytes());
    page.extend_from_slice(&[0; 4]); // CRC, filled in below
    page.push(lacing.len() as u8);
    page.extend_from_slice(&lacing);
    for p in packets {
        page.extend_from_slice(p);
    }
    let crc = ogg_crc(&page);
    page[22..26].copy_from_slice(&crc.to_le_bytes());
    page
}

/// FLAC's UTF-8-like coding of a frame number (up to 36 bits).
fn utf8_number(n: u64) -> Vec<u8> {
    if n < 0x80 {
        return vec![n as u8];
    }
    // Continuation bytes carry 6 bits each; the lead byte of a k-byte
    // sequence has k high bits set and 7 - k payload bits.
    let mut k = 2;
    while k < 7 && n >= 1u64 << (5 * k + 1) {
        k += 1;
    }
    let mut out = Vec::with_capacity(k);
    let lead_bits = 6 * (k - 1);
    let lead_mark = (0xff00u16 >> k) as u8;
    out.push(lead_mark | (n >> lead_bits) as u8);
    for i in (0..k - 1).rev() {
        out.push(0x80 | ((n >> (6 * i)) & 0x3f) as u8);
    }
    out
}

/// CRC-8, polynomial 0x07, initial 0 (FLAC frame headers).
fn crc8(data: &[u8]) -> u8 {
    data.iter().fold(0u8, |mut crc, &b| {
        crc ^= b;
        for _ in 0..8 {
            crc = if crc & 0x80 != 0 {
                (crc << 1) ^ 0x07
            } else {
                crc << 1
            };
        }
        crc
    })
}

/// CRC-16, polynomial 0x8005, initial 0, not reflected (FLAC frames).
fn crc16(data: &[u8]) -> u16 {
    data.iter().fold(0u16, |mut crc, &b| {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x8005
            } else {
                crc << 1
            };
        }
        crc
    })
}

/// CRC-32, polynomial 0x04C11DB7, initial 0, not reflected, no final xor
/// (Ogg pages).
fn ogg_crc(data: &[u8]) -> u32 {
    data.iter().fold(0u32, |mut crc, &b| {
        crc ^= u32::from(b) << 24;
        for _ in 0..8 {
            crc = if crc & 0x8000_0000 != 0 {
                (crc << 1) ^ 0x04c1_1db7
            } else {
                crc << 1
            };
        }
        crc
    })
}

/// Big-endian bit packing for headers.
#[derive(Default)]
struct BitWriter {
    bytes: Vec<u8>,
    /// Bits used in the last byte (0 = none pending).
    used: u32,
}

impl BitWriter {
    /// The low `width` bits of `value`, most significant first.
    fn put(&mut self, value: u64, width: u32) {
        for i in (0..width).rev() {
            if self.used == 0 {
                self.bytes.push(0);
            }
            let bit = ((value >> i) & 1) as u8;
            if let Some(last) = self.bytes.last_mut() {
                *last |= bit << (7 - self.used);
            }
            self.used = (self.used + 1) % 8;
        }
    }

    /// The bytes, the last one zero-padded.
    fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crcs_match_their_catalogue_check_values() {
        // The check value of each CRC for "123456789" (CRC-8/SMBUS,
        // CRC-16/UMTS, and CRC-32/POSIX before its final inversion).
        assert_eq!(crc8(b"123456789"), 0xf4);
        assert_eq!(crc16(b"123456789"), 0xfee8);
        assert_eq!(ogg_crc(b"123456789"), !0x765e_7680);
    }

    #[test]
    fn frame_numbers_are_utf8_coded() {
        assert_eq!(utf8_number(0x7f), [0x7f]);
        assert_eq!(utf8_number(0x80), [0xc2, 0x80]);
        assert_eq!(utf8_number(0x7ff), [0xdf, 0xbf]);
        assert_eq!(utf8_number(0x800), [0xe0, 0xa0, 0x80]);
        assert_eq!(utf8_number(0x10000), [0xf0, 0x90, 0x80, 0x80]);
        assert_eq!("\u{10ffff}".as_bytes(), utf8_number(0x10ffff));
    }

    #[test]
    fn bit_writer_packs_msb_first() {
        let mut w = BitWriter::default();
        w.put(0b101, 3);
        w.put(0xff, 8);
        assert_eq!(w.into_bytes(), [0b1011_1111, 0b1110_0000]);
    }

    #[test]
    fn wav_and_pcm_have_exact_sizes() {
        let wav = silence(Format::Wav, 1000);
        assert_eq!(wav.len(), 44 + 48_000);
        assert_eq!(&wav[..4], b"RIFF");
        assert_eq!(&wav[8..16], b"WAVEfmt ");
        assert_eq!(
            u32::from_le_bytes([wav[40], wav[41], wav[42], wav[43]]),
            48_000
        );
        assert_eq!(silence(Format::Pcm, 500).len(), 24_000);
    }

    #[test]
    fn framed_formats_start_with_their_magic() {
        let mp3 = silence(Format::Mp3, 500);
        assert_eq!(mp3.len(), 21 * 96, "ceil(500 / 24) frames");
        assert_eq!(&mp3[..4], [0xff, 0xf3, 0x44, 0xc0]);
        let aac = silence(Format::Aac, 500);
        assert_eq!(aac.len(), 12 * 11, "ceil(12000 / 1024) frames");
        // Sync word, then the 13-bit frame length of 11.
        assert_eq!(&aac[..2], [0xff, 0xf1]);
        assert_eq!(
            ((aac[3] & 0x03) as u16) << 11 | (aac[4] as u16) << 3 | (aac[5] >> 5) as u16,
            11
        );
        let flac = silence(Format::Flac, 500);
        assert_eq!(&flac[..5], b"fLaC\x80");
        // 12000 samples: frames of 4096, 4096 and 3808, 13 bytes each.
        assert_eq!(flac.len(), 4 + 4 + 34 + 3 * 13);
        let opus = silence(Format::Opus, 500);
        assert_eq!(&opus[..4], b"OggS");
        assert_eq!(&opus[28..36], b"OpusHead");
    }

    #[test]
    fn ogg_pages_carry_a_valid_crc() {
        let page = ogg_page(0x02, 7, 1, 0, &[b"abc", &[0; 300]]);
        // Lacing: 3, then 255 + 45.
        assert_eq!(page[26], 3);
        assert_eq!(&page[27..30], [3, 255, 45]);
        let mut zeroed = page.clone();
        zeroed[22..26].copy_from_slice(&[0; 4]);
        assert_eq!(page[22..26], ogg_crc(&zeroed).to_le_bytes());
    }
}
