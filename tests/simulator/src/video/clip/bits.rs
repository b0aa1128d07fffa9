//! An MSB-first bit writer with the Exp-Golomb codes H.264 headers use.

#[derive(Default)]
pub struct BitWriter {
    bytes: Vec<u8>,
    /// Bits already used in the last byte (0 when byte-aligned).
    used: u8,
}

impl BitWriter {
    pub fn bit(&mut self, on: bool) {
        if self.used == 0 {
            self.bytes.push(0);
        }
        if on {
            if let Some(last) = self.bytes.last_mut() {
                *last |= 0x80 >> self.used;
            }
        }
        self.used = (self.used + 1) % 8;
    }

    /// The low `n` bits of `value`, most significant first (`u(n)`).
    pub fn bits(&mut self, n: u32, value: u64) {
        for i in (0..n).rev() {
            self.bit((value >> i) & 1 == 1);
        }
    }

    pub fn flag(&mut self, on: bool) {
        self.bit(on);
    }

    /// Unsigned Exp-Golomb (`ue(v)`).
    pub fn ue(&mut self, value: u32) {
        let coded = u64::from(value) + 1;
        let len = 64 - coded.leading_zeros();
        self.bits(len - 1, 0);
        self.bits(len, coded);
    }

    /// Signed Exp-Golomb (`se(v)`).
    pub fn se(&mut self, value: i32) {
        let mapped = if value > 0 {
            2 * value.unsigned_abs() - 1
        } else {
            2 * value.unsigned_abs()
        };
        self.ue(mapped);
    }

    /// Zero bits up to the next byte boundary (`pcm_alignment_zero_bit`).
    pub fn align_zero(&mut self) {
        self.used = 0;
    }

    /// Whole bytes; the writer must be byte-aligned.
    pub fn bytes(&mut self, data: &[u8]) {
        debug_assert_eq!(self.used, 0, "unaligned byte write");
        self.align_zero();
        self.bytes.extend_from_slice(data);
    }

    /// `rbsp_trailing_bits()`: a one, then zeros to the byte boundary.
    pub fn finish(mut self) -> Vec<u8> {
        self.bit(true);
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_golomb_codes() {
        // ue: 0 -> 1, 1 -> 010, 2 -> 011, 3 -> 00100; then the stop bit.
        let mut w = BitWriter::default();
        for v in [0, 1, 2, 3] {
            w.ue(v);
        }
        // 1 010 011 00100 1 -> 1010 0110 0100 1000
        assert_eq!(w.finish(), vec![0b1010_0110, 0b0100_1000]);

        let mut w = BitWriter::default();
        // se: 1 -> 010, -1 -> 011, 0 -> 1
        w.se(1);
        w.se(-1);
        w.se(0);
        // 010 011 1, then the stop bit fills the byte.
        assert_eq!(w.finish(), vec![0b0100_1111]);
    }

    #[test]
    fn alignment_pads_with_zeros() {
        let mut w = BitWriter::default();
        w.bits(3, 0b101);
        w.align_zero();
        w.bytes(&[0xAB]);
        w.bits(8, 0x12);
        assert_eq!(w.finish(), vec![0b1010_0000, 0xAB, 0x12, 0x80]);
    }
}
