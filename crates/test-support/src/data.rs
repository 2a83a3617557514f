//! Deterministic data: the same seed gives the same bytes on every run and platform.

/// `n` bytes from a xorshift generator seeded with `seed` (incompressible noise).
pub fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// xorshift64* (Vigna): a fast deterministic generator; no RNG crate needed.
pub struct XorShift(u64);

impl XorShift {
    /// A generator for `seed`; nearby seeds give unrelated streams.
    pub fn new(seed: u64) -> Self {
        // Never zero; mix the seed so nearby seeds give unrelated streams.
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xd1b5_4a32_d192_ed03 | 1)
    }

    /// The next 64 bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// `len` pseudo-random bytes (uniform: incompressible), from [`XorShift`].
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = XorShift::new(seed);
    let mut out = vec![0u8; len];
    let mut chunks = out.chunks_exact_mut(8);
    for c in &mut chunks {
        c.copy_from_slice(&rng.next_u64().to_le_bytes());
    }
    let rest = chunks.into_remainder();
    let last = rng.next_u64().to_le_bytes();
    let n = rest.len();
    rest.copy_from_slice(&last[..n]);
    out
}

/// `count` little-endian float32 values, roughly normal with mean 0 and standard deviation
/// `std` (Irwin-Hall: the sum of four uniform 16-bit draws, centred and scaled), like the
/// weights of a trained layer: the sign and low mantissa bits are random, the exponent is not.
pub fn normalish_f32_bytes(count: usize, std: f32, seed: u64) -> Vec<u8> {
    let mut rng = XorShift::new(seed);
    let mut out = vec![0u8; count * 4];
    // Sum of 4 uniforms on [0, 65536): mean 131070, variance 4 * 65536^2 / 12.
    let mean = 2.0 * 65535.0f32;
    let scale = std / (65536.0f32 * (4.0f32 / 12.0).sqrt());
    for c in out.chunks_exact_mut(4) {
        let r = rng.next_u64();
        let s = (r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48);
        let v = (s as f32 - mean) * scale;
        c.copy_from_slice(&v.to_le_bytes());
    }
    out
}
