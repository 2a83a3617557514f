//! FarmHash `Fingerprint64` (= `farmhashna::Hash64`, what TensorFlow's `tsl::Fingerprint64`
//! calls) and TensorFlow's `FingerprintCat64`.
//!
//! Written here rather than taken from a crate: the `farmhash` crate's `fingerprint64` (1.1.5)
//! differs from Google's for every length that is a multiple of 64 from 128 on (its block loop
//! runs once too often), and no other crate exposes `Fingerprint64`. The tests check this code
//! against values computed by the `farmhashna::Hash64` exported from TensorFlow 2.21's
//! `libtensorflow_framework.so.2`.
//!
//! [`Fingerprint64`] is a streaming form: feeding bytes in any pieces gives the one-shot value,
//! so a multi-gigabyte serialization is hashed without being held in memory.

const K0: u64 = 0xc3a5_c85c_97cb_3127;
const K1: u64 = 0xb492_b66f_be98_f273;
const K2: u64 = 0x9ae1_6a3b_2f90_404f;
const SEED: u64 = 81;

/// FarmHash `Fingerprint64` of `data`.
pub fn fingerprint64(data: &[u8]) -> u64 {
    let mut h = Fingerprint64::new();
    h.update(data);
    h.finish()
}

/// TensorFlow's `FingerprintCat64(fp1, fp2)`: combines two fingerprints (not commutative).
pub fn fingerprint_cat64(fp1: u64, fp2: u64) -> u64 {
    const MUL: u64 = 0xc6a4_a793_5bd1_e995;
    let mut result = fp1 ^ MUL;
    result ^= shift_mix(fp2.wrapping_mul(MUL)).wrapping_mul(MUL);
    result = result.wrapping_mul(MUL);
    result = shift_mix(result).wrapping_mul(MUL);
    shift_mix(result)
}

/// Streaming FarmHash `Fingerprint64`: [`update`](Self::update) with the bytes in any number
/// of pieces, then [`finish`](Self::finish).
#[derive(Clone)]
pub struct Fingerprint64 {
    /// Bytes not yet run through the block loop: at most 64 once a block has been processed
    /// (the last block is kept back for the final step), at most 64 before.
    buf: [u8; 64],
    buf_len: usize,
    /// The last block run through the loop: the final step reads the last 64 input bytes,
    /// which may reach back into it.
    prev: [u8; 64],
    state: Option<State>,
    len: u64,
}

#[derive(Clone, Copy)]
struct State {
    x: u64,
    y: u64,
    z: u64,
    v: (u64, u64),
    w: (u64, u64),
}

/// The loop's state before its first block, `s`.
fn initial(s: &[u8; 64]) -> State {
    let y = SEED.wrapping_mul(K1).wrapping_add(113);
    State {
        x: SEED.wrapping_mul(K2).wrapping_add(fetch64(s, 0)),
        y,
        z: shift_mix(y.wrapping_mul(K2).wrapping_add(113)).wrapping_mul(K2),
        v: (0, 0),
        w: (0, 0),
    }
}

/// The loop's state after block `s`, from the state before it.
#[inline(always)]
fn step(mut st: State, s: &[u8; 64]) -> State {
    st.x =
        st.x.wrapping_add(st.y)
            .wrapping_add(st.v.0)
            .wrapping_add(fetch64(s, 8))
            .rotate_right(37)
            .wrapping_mul(K1);
    st.y =
        st.y.wrapping_add(st.v.1)
            .wrapping_add(fetch64(s, 48))
            .rotate_right(42)
            .wrapping_mul(K1);
    st.x ^= st.w.1;
    st.y = st.y.wrapping_add(st.v.0).wrapping_add(fetch64(s, 40));
    st.z = st.z.wrapping_add(st.w.0).rotate_right(33).wrapping_mul(K1);
    st.v = weak_hash_32(s, 0, st.v.1.wrapping_mul(K1), st.x.wrapping_add(st.w.0));
    st.w = weak_hash_32(
        s,
        32,
        st.z.wrapping_add(st.w.1),
        st.y.wrapping_add(fetch64(s, 16)),
    );
    std::mem::swap(&mut st.z, &mut st.x);
    st
}

impl Default for Fingerprint64 {
    fn default() -> Self {
        Self::new()
    }
}

impl Fingerprint64 {
    /// An empty hasher.
    pub fn new() -> Self {
        Self {
            buf: [0; 64],
            buf_len: 0,
            prev: [0; 64],
            state: None,
            len: 0,
        }
    }

    /// Number of bytes fed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether nothing has been fed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Feeds `data`.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        // A block runs through the loop only once a byte after it is known to exist.
        if self.buf_len > 0 {
            let take = (64 - self.buf_len).min(data.len());
            self.buf[self.buf_len..self.buf_len + take].copy_from_slice(&data[..take]);
            self.buf_len += take;
            data = &data[take..];
            if data.is_empty() {
                return;
            }
            // The buffer is full and more follows: it is a loop block.
            let block = self.buf;
            let state = self.state.unwrap_or_else(|| initial(&block));
            self.state = Some(step(state, &block));
            self.prev = block;
            self.buf_len = 0;
        }
        if data.len() > 64 {
            // The state stays in registers through the loop, and only the last block is kept
            // (stored after each block, the state and the block were a quarter of the time).
            let (mut last, rest) = data.split_first_chunk::<64>().expect("more than 64 bytes");
            let mut state = step(self.state.unwrap_or_else(|| initial(last)), last);
            data = rest;
            while data.len() > 64 {
                let (block, rest) = data.split_first_chunk::<64>().expect("more than 64 bytes");
                state = step(state, block);
                last = block;
                data = rest;
            }
            self.state = Some(state);
            self.prev = *last;
        }
        self.buf[..data.len()].copy_from_slice(data);
        self.buf_len = data.len();
    }

    /// The fingerprint of everything fed.
    pub fn finish(&self) -> u64 {
        let Some(mut st) = self.state else {
            let s = &self.buf[..self.buf_len];
            return match s.len() {
                0..=16 => hash_len_0_to_16(s),
                17..=32 => hash_len_17_to_32(s),
                _ => hash_len_33_to_64(s),
            };
        };
        // The last 64 input bytes: the tail of the previous block, then the buffer.
        let mut last = [0u8; 64];
        let keep = 64 - self.buf_len;
        last[..keep].copy_from_slice(&self.prev[self.buf_len..]);
        last[keep..].copy_from_slice(&self.buf[..self.buf_len]);
        let s = &last;

        let mul = K1.wrapping_add((st.z & 0xff) << 1);
        st.w.0 = st.w.0.wrapping_add((self.len - 1) & 63);
        st.v.0 = st.v.0.wrapping_add(st.w.0);
        st.w.0 = st.w.0.wrapping_add(st.v.0);
        st.x =
            st.x.wrapping_add(st.y)
                .wrapping_add(st.v.0)
                .wrapping_add(fetch64(s, 8))
                .rotate_right(37)
                .wrapping_mul(mul);
        st.y =
            st.y.wrapping_add(st.v.1)
                .wrapping_add(fetch64(s, 48))
                .rotate_right(42)
                .wrapping_mul(mul);
        st.x ^= st.w.1.wrapping_mul(9);
        st.y =
            st.y.wrapping_add(st.v.0.wrapping_mul(9))
                .wrapping_add(fetch64(s, 40));
        st.z = st.z.wrapping_add(st.w.0).rotate_right(33).wrapping_mul(mul);
        st.v = weak_hash_32(s, 0, st.v.1.wrapping_mul(mul), st.x.wrapping_add(st.w.0));
        st.w = weak_hash_32(
            s,
            32,
            st.z.wrapping_add(st.w.1),
            st.y.wrapping_add(fetch64(s, 16)),
        );
        std::mem::swap(&mut st.z, &mut st.x);
        hash_len_16(
            hash_len_16(st.v.0, st.w.0, mul)
                .wrapping_add(shift_mix(st.y).wrapping_mul(K0))
                .wrapping_add(st.z),
            hash_len_16(st.v.1, st.w.1, mul).wrapping_add(st.x),
            mul,
        )
    }
}

fn fetch64(s: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"))
}

fn fetch32(s: &[u8], at: usize) -> u64 {
    u64::from(u32::from_le_bytes(
        s[at..at + 4].try_into().expect("4 bytes"),
    ))
}

fn shift_mix(v: u64) -> u64 {
    v ^ (v >> 47)
}

fn hash_len_16(u: u64, v: u64, mul: u64) -> u64 {
    let mut a = (u ^ v).wrapping_mul(mul);
    a ^= a >> 47;
    let mut b = (v ^ a).wrapping_mul(mul);
    b ^= b >> 47;
    b.wrapping_mul(mul)
}

/// `WeakHashLen32WithSeeds(s + at, a, b)`.
fn weak_hash_32(s: &[u8], at: usize, mut a: u64, mut b: u64) -> (u64, u64) {
    let (w, x, y, z) = (
        fetch64(s, at),
        fetch64(s, at + 8),
        fetch64(s, at + 16),
        fetch64(s, at + 24),
    );
    a = a.wrapping_add(w);
    b = b.wrapping_add(a).wrapping_add(z).rotate_right(21);
    let c = a;
    a = a.wrapping_add(x).wrapping_add(y);
    b = b.wrapping_add(a.rotate_right(44));
    (a.wrapping_add(z), b.wrapping_add(c))
}

fn hash_len_0_to_16(s: &[u8]) -> u64 {
    let len = s.len();
    let len64 = len as u64;
    if len >= 8 {
        let mul = K2.wrapping_add(len64 * 2);
        let a = fetch64(s, 0).wrapping_add(K2);
        let b = fetch64(s, len - 8);
        let c = b.rotate_right(37).wrapping_mul(mul).wrapping_add(a);
        let d = a.rotate_right(25).wrapping_add(b).wrapping_mul(mul);
        return hash_len_16(c, d, mul);
    }
    if len >= 4 {
        let mul = K2.wrapping_add(len64 * 2);
        let a = fetch32(s, 0);
        return hash_len_16(len64.wrapping_add(a << 3), fetch32(s, len - 4), mul);
    }
    if len > 0 {
        let (a, b, c) = (s[0], s[len >> 1], s[len - 1]);
        let y = u32::from(a) + (u32::from(b) << 8);
        let z = len as u32 + (u32::from(c) << 2);
        return shift_mix(u64::from(y).wrapping_mul(K2) ^ u64::from(z).wrapping_mul(K0))
            .wrapping_mul(K2);
    }
    K2
}

fn hash_len_17_to_32(s: &[u8]) -> u64 {
    let len = s.len();
    let mul = K2.wrapping_add(len as u64 * 2);
    let a = fetch64(s, 0).wrapping_mul(K1);
    let b = fetch64(s, 8);
    let c = fetch64(s, len - 8).wrapping_mul(mul);
    let d = fetch64(s, len - 16).wrapping_mul(K2);
    hash_len_16(
        a.wrapping_add(b)
            .rotate_right(43)
            .wrapping_add(c.rotate_right(30))
            .wrapping_add(d),
        a.wrapping_add(b.wrapping_add(K2).rotate_right(18))
            .wrapping_add(c),
        mul,
    )
}

fn hash_len_33_to_64(s: &[u8]) -> u64 {
    let len = s.len();
    let mul = K2.wrapping_add(len as u64 * 2);
    let a = fetch64(s, 0).wrapping_mul(K2);
    let b = fetch64(s, 8);
    let c = fetch64(s, len - 8).wrapping_mul(mul);
    let d = fetch64(s, len - 16).wrapping_mul(K2);
    let y = a
        .wrapping_add(b)
        .rotate_right(43)
        .wrapping_add(c.rotate_right(30))
        .wrapping_add(d);
    let z = hash_len_16(
        y,
        a.wrapping_add(b.wrapping_add(K2).rotate_right(18))
            .wrapping_add(c),
        mul,
    );
    let e = fetch64(s, 16).wrapping_mul(mul);
    let f = fetch64(s, 24);
    let g = y.wrapping_add(fetch64(s, len - 32)).wrapping_mul(mul);
    let h = z.wrapping_add(fetch64(s, len - 24)).wrapping_mul(mul);
    hash_len_16(
        e.wrapping_add(f)
            .rotate_right(43)
            .wrapping_add(g.rotate_right(30))
            .wrapping_add(h),
        e.wrapping_add(f.wrapping_add(a).rotate_right(18))
            .wrapping_add(g),
        mul,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test input: byte `i` is `(i * 131 + 17) % 251`.
    fn data(len: usize) -> Vec<u8> {
        (0..len).map(|i| ((i * 131 + 17) % 251) as u8).collect()
    }

    /// `farmhashna::Hash64` from TensorFlow 2.21's `libtensorflow_framework.so.2` over
    /// prefixes of [`data`]: every length class of the algorithm, multiples of 64 included.
    const TF_VECTORS: [(usize, u64); 33] = [
        (0, 11160318154034397263),
        (1, 13972518155051244007),
        (2, 16479644212507597872),
        (3, 3918507962007831604),
        (4, 4909961665849722461),
        (5, 14870311813417637630),
        (7, 3731359924531424058),
        (8, 15192866433965404588),
        (9, 18392378224489083100),
        (15, 10878192508327486136),
        (16, 10613147563961468449),
        (17, 4189289977569093441),
        (31, 5347684681017102487),
        (32, 7786261141544130264),
        (33, 5156070928799057958),
        (63, 390531066749414),
        (64, 261970182465454830),
        (65, 11638761591677348377),
        (100, 9619334966858305757),
        (127, 1768557758713105123),
        (128, 720258315315422517),
        (129, 4427520240483383746),
        (191, 7242217286604812370),
        (192, 222640546499731760),
        (193, 551745504054503728),
        (255, 4826644248740993795),
        (256, 7812984758795626743),
        (257, 10607356772102664879),
        (1000, 11633854148587936523),
        (4096, 13574005461756458013),
        (65536, 14920701006268613543),
        (65537, 5110842627534952869),
        ((1 << 20) + 7, 1877165228663810675),
    ];

    #[test]
    fn matches_tensorflow_on_known_vectors() {
        let d = data((1 << 20) + 7);
        for (len, want) in TF_VECTORS {
            assert_eq!(fingerprint64(&d[..len]), want, "length {len}");
        }
    }

    #[test]
    fn matches_tensorflow_on_strings() {
        for (s, want) in [
            ("", 11160318154034397263u64),
            ("a", 12917804110809363939),
            ("hello world", 6381520714923946011),
            ("serving_default", 15811929960628376559),
            (
                "The quick brown fox jumps over the lazy dog",
                12375473906752639284,
            ),
        ] {
            assert_eq!(fingerprint64(s.as_bytes()), want, "{s:?}");
        }
    }

    /// `FingerprintCat64` folded over the fingerprints of every length 0..=1024, as computed
    /// with TensorFlow's `farmhashna::Hash64` and its header's `FingerprintCat64`.
    #[test]
    fn matches_tensorflow_on_every_length_up_to_1024() {
        let d = data(1024);
        let acc = (0..=1024).fold(0, |acc, len| {
            fingerprint_cat64(acc, fingerprint64(&d[..len]))
        });
        assert_eq!(acc, 6866544715871560487);
    }

    #[test]
    fn cat_matches_tensorflow() {
        assert_eq!(fingerprint_cat64(1, 2), 14454907135238785252);
        assert_eq!(fingerprint_cat64(0, 0), 6351753276682545529);
        assert_eq!(fingerprint_cat64(u64::MAX, 12345), 15285112449120893218);
    }

    #[test]
    fn streaming_equals_one_shot_for_any_split() {
        let d = data(600);
        for len in [0, 1, 63, 64, 65, 127, 128, 129, 200, 256, 511, 512, 600] {
            let want = fingerprint64(&d[..len]);
            for piece in [1, 3, 7, 63, 64, 65, 100] {
                let mut h = Fingerprint64::new();
                for chunk in d[..len].chunks(piece) {
                    h.update(chunk);
                }
                assert_eq!(h.finish(), want, "length {len}, pieces of {piece}");
                assert_eq!(h.len(), len as u64);
            }
            // Uneven pieces, including empty ones.
            let mut h = Fingerprint64::new();
            let (a, b) = d[..len].split_at(len / 3);
            h.update(a);
            h.update(&[]);
            h.update(b);
            assert_eq!(h.finish(), want, "length {len}, two pieces");
        }
    }
}
