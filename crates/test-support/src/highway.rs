//! HighwayHash-64 with the Riegeli key: a small portable implementation (after the reference
//! C code) so tests can hand-craft block and chunk headers whose hashes are valid, and so reach
//! the checks that come after the hash check. Independent of the library's own hashing.

const KEY: [u64; 4] = [
    0x2f69_6c65_6765_6952,
    0x0a73_6472_6f63_6572,
    0x2f69_6c65_6765_6952,
    0x0a73_6472_6f63_6572,
];

struct State {
    v0: [u64; 4],
    v1: [u64; 4],
    mul0: [u64; 4],
    mul1: [u64; 4],
}

impl State {
    fn new(key: [u64; 4]) -> Self {
        let mul0 = [
            0xdbe6_d5d5_fe4c_ce2f,
            0xa409_3822_299f_31d0,
            0x1319_8a2e_0370_7344,
            0x243f_6a88_85a3_08d3,
        ];
        let mul1 = [
            0x3bd3_9e10_cb0e_f593,
            0xc0ac_f169_b5f1_8a8c,
            0xbe54_66cf_34e9_0c6c,
            0x4528_21e6_38d0_1377,
        ];
        let mut v0 = [0; 4];
        let mut v1 = [0; 4];
        for i in 0..4 {
            v0[i] = mul0[i] ^ key[i];
            v1[i] = mul1[i] ^ key[i].rotate_left(32);
        }
        State { v0, v1, mul0, mul1 }
    }

    fn update(&mut self, lanes: [u64; 4]) {
        for (i, lane) in lanes.iter().enumerate() {
            self.v1[i] = self.v1[i].wrapping_add(self.mul0[i].wrapping_add(*lane));
            self.mul0[i] ^= (self.v1[i] & 0xffff_ffff).wrapping_mul(self.v0[i] >> 32);
            self.v0[i] = self.v0[i].wrapping_add(self.mul1[i]);
            self.mul1[i] ^= (self.v0[i] & 0xffff_ffff).wrapping_mul(self.v1[i] >> 32);
        }
        let (a, b) = zipper(self.v1[1], self.v1[0]);
        self.v0[1] = self.v0[1].wrapping_add(a);
        self.v0[0] = self.v0[0].wrapping_add(b);
        let (a, b) = zipper(self.v1[3], self.v1[2]);
        self.v0[3] = self.v0[3].wrapping_add(a);
        self.v0[2] = self.v0[2].wrapping_add(b);
        let (a, b) = zipper(self.v0[1], self.v0[0]);
        self.v1[1] = self.v1[1].wrapping_add(a);
        self.v1[0] = self.v1[0].wrapping_add(b);
        let (a, b) = zipper(self.v0[3], self.v0[2]);
        self.v1[3] = self.v1[3].wrapping_add(a);
        self.v1[2] = self.v1[2].wrapping_add(b);
    }

    fn packet(&mut self, p: &[u8]) {
        let mut lanes = [0u64; 4];
        for (i, lane) in lanes.iter_mut().enumerate() {
            *lane = u64::from_le_bytes(p[i * 8..i * 8 + 8].try_into().unwrap());
        }
        self.update(lanes);
    }

    fn remainder(&mut self, bytes: &[u8]) {
        let size = bytes.len();
        let size_mod4 = size & 3;
        let head = size & !3;
        for v in &mut self.v0 {
            *v = v.wrapping_add(((size as u64) << 32) + size as u64);
        }
        for v in &mut self.v1 {
            let lo = (*v as u32).rotate_left(size as u32);
            let hi = ((*v >> 32) as u32).rotate_left(size as u32);
            *v = u64::from(lo) | (u64::from(hi) << 32);
        }
        let mut packet = [0u8; 32];
        packet[..head].copy_from_slice(&bytes[..head]);
        let rest = &bytes[head..];
        if size & 16 != 0 {
            for i in 0..4 {
                packet[28 + i] = bytes[head + i + size_mod4 - 4];
            }
        } else if size_mod4 != 0 {
            packet[16] = rest[0];
            packet[17] = rest[size_mod4 >> 1];
            packet[18] = rest[size_mod4 - 1];
        }
        self.packet(&packet);
    }

    fn finish(mut self) -> u64 {
        for _ in 0..4 {
            let v = self.v0;
            self.update([
                v[2].rotate_left(32),
                v[3].rotate_left(32),
                v[0].rotate_left(32),
                v[1].rotate_left(32),
            ]);
        }
        self.v0[0]
            .wrapping_add(self.v1[0])
            .wrapping_add(self.mul0[0])
            .wrapping_add(self.mul1[0])
    }
}

fn zipper(v1: u64, v0: u64) -> (u64, u64) {
    let add0 = (((v0 & 0xff00_0000) | (v1 & 0xff_0000_0000)) >> 24)
        | (((v0 & 0xff00_0000_0000) | (v1 & 0xff_0000_0000_0000)) >> 16)
        | (v0 & 0xff_0000)
        | ((v0 & 0xff00) << 32)
        | ((v1 & 0xff00_0000_0000_0000) >> 8)
        | (v0 << 56);
    let add1 = (((v1 & 0xff00_0000) | (v0 & 0xff_0000_0000)) >> 24)
        | (v1 & 0xff_0000)
        | ((v1 & 0xff00_0000_0000) >> 16)
        | ((v1 & 0xff00) << 24)
        | ((v0 & 0xff_0000_0000_0000) >> 8)
        | ((v1 & 0xff) << 48)
        | (v0 & 0xff00_0000_0000_0000);
    (add1, add0)
}

/// HighwayHash-64 of `data` with the Riegeli key.
pub fn hh(data: &[u8]) -> u64 {
    let mut s = State::new(KEY);
    let full = data.len() / 32 * 32;
    for p in data[..full].chunks_exact(32) {
        s.packet(p);
    }
    if data.len() % 32 != 0 {
        s.remainder(&data[full..]);
    }
    s.finish()
}

/// A 40-byte chunk header for `data`; `data_size` overrides the stored data size.
pub fn chunk_header(
    data: &[u8],
    chunk_type: u8,
    num_records: u64,
    decoded_size: u64,
    data_size: Option<u64>,
) -> [u8; 40] {
    let mut h = [0u8; 40];
    h[8..16].copy_from_slice(&data_size.unwrap_or(data.len() as u64).to_le_bytes());
    h[16..24].copy_from_slice(&hh(data).to_le_bytes());
    h[24..32].copy_from_slice(&((num_records << 8) | u64::from(chunk_type)).to_le_bytes());
    h[32..40].copy_from_slice(&decoded_size.to_le_bytes());
    let hash = hh(&h[8..40]);
    h[0..8].copy_from_slice(&hash.to_le_bytes());
    h
}

/// Recomputes the hash of the 40-byte chunk header at `at` after its fields were edited.
pub fn rehash_chunk_header(file: &mut [u8], at: usize) {
    let hash = hh(&file[at + 8..at + 40]);
    file[at..at + 8].copy_from_slice(&hash.to_le_bytes());
}

/// Riegeli's 64-byte file start: the block header at 0 and the signature chunk header.
pub fn signature() -> Vec<u8> {
    let mut block = vec![0u8; 24];
    block[16..24].copy_from_slice(&64u64.to_le_bytes());
    let h = hh(&block[8..24]);
    block[0..8].copy_from_slice(&h.to_le_bytes());
    block.extend_from_slice(&chunk_header(&[], b's', 0, 0, None));
    block
}
