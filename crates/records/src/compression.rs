//! Compression of chunk buffers: the types stored in chunks, decompression
//! with exact size checks and bounded allocation, and streaming compressors
//! for the writer.
//!
//! A compressed buffer in a chunk is `varint64 decompressed_size` followed by
//! the compressed stream (Brotli, Zstd, or raw Snappy). Uncompressed buffers
//! carry no prefix. Decompression always checks that the output is exactly
//! the declared size and never preallocates more than the input can
//! plausibly expand to; the output grows as data actually arrives.

use std::io::{self, Read, Write};

use crate::brotli_raw;
use crate::chunk_bytes::ChunkBytes;
use crate::error::DecodeFault;

/// How the writer compresses chunks (the compression type and its level).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Store buffers as they are.
    None,
    /// Brotli with the given quality (0..=11); Riegeli's default is 6.
    Brotli {
        /// Brotli quality, 0..=11.
        level: u32,
    },
    /// Zstd with the given level (Riegeli's default is 3).
    Zstd {
        /// Zstd compression level.
        level: i32,
    },
    /// Raw Snappy (whole buffer at once).
    Snappy,
}

impl Compression {
    /// The compression type this setting writes into chunks.
    pub fn compression_type(self) -> CompressionType {
        match self {
            Compression::None => CompressionType::None,
            Compression::Brotli { .. } => CompressionType::Brotli,
            Compression::Zstd { .. } => CompressionType::Zstd,
            Compression::Snappy => CompressionType::Snappy,
        }
    }
}

/// The compression type byte at the start of simple and transposed chunk
/// data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CompressionType {
    /// 0: uncompressed.
    None,
    /// `'b'`: Brotli.
    Brotli,
    /// `'z'`: Zstd.
    Zstd,
    /// `'s'`: raw Snappy.
    Snappy,
}

impl CompressionType {
    /// Decodes the byte; `None` for an unknown compression type.
    pub fn from_byte(b: u8) -> Option<CompressionType> {
        match b {
            0 => Some(CompressionType::None),
            b'b' => Some(CompressionType::Brotli),
            b'z' => Some(CompressionType::Zstd),
            b's' => Some(CompressionType::Snappy),
            _ => None,
        }
    }

    /// The byte stored in chunks.
    pub fn to_byte(self) -> u8 {
        match self {
            CompressionType::None => 0,
            CompressionType::Brotli => b'b',
            CompressionType::Zstd => b'z',
            CompressionType::Snappy => b's',
        }
    }
}

/// Parses a compression type byte or reports it as unsupported.
pub(crate) fn parse_type(b: u8) -> Result<CompressionType, DecodeFault> {
    CompressionType::from_byte(b)
        .ok_or_else(|| DecodeFault::Unsupported(format!("unknown compression type 0x{b:02x}")))
}

/// Size of the output buffer used when streaming decompressed data.
const STREAM_BUFFER: usize = 1 << 18;

/// Upper bound used for the *initial* allocation of a decompressed buffer:
/// the declared size, but never more than the input could reasonably expand
/// to. Larger legitimate outputs just grow the buffer as they arrive.
fn initial_capacity(declared: u64, input_len: u64) -> usize {
    let plausible = input_len.saturating_mul(8).saturating_add(1 << 20);
    usize::try_from(declared.min(plausible)).unwrap_or(usize::MAX)
}

/// A sink that accepts at most `limit` bytes and counts them.
struct LimitedSink<'a> {
    out: &'a mut dyn Write,
    written: u64,
    limit: u64,
}

impl Write for LimitedSink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if buf.len() as u64 > self.limit - self.written {
            return Err(io::Error::other(OverLimit));
        }
        self.out.write_all(buf)?;
        self.written += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Marker error: decompressed output exceeded the declared size.
#[derive(Debug)]
struct OverLimit;

impl std::fmt::Display for OverLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("decompressed data is larger than declared")
    }
}

impl std::error::Error for OverLimit {}

/// Turns an I/O error from the limited sink or a decompressor into a fault:
/// errors from the caller's writer stay I/O errors, the rest are
/// decompression faults.
fn classify(e: io::Error, from_sink: bool) -> DecodeFault {
    if e.get_ref().is_some_and(|inner| inner.is::<OverLimit>()) {
        return DecodeFault::Decompression("decompressed data is larger than declared".into());
    }
    if from_sink {
        DecodeFault::Io(e)
    } else {
        DecodeFault::Decompression(e.to_string())
    }
}

/// A `Vec` writer that grows only as data arrives, never past `limit`.
struct GrowingVec {
    buf: Vec<u8>,
    limit: u64,
}

impl Write for GrowingVec {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let needed = self.buf.len() as u64 + data.len() as u64;
        if needed > self.limit {
            return Err(io::Error::other(OverLimit));
        }
        if needed > self.buf.capacity() as u64 {
            // Grow geometrically, capped at the declared size.
            let target = (self.buf.capacity() as u64)
                .saturating_mul(2)
                .max(needed)
                .min(self.limit);
            self.buf.reserve_exact(target as usize - self.buf.len());
        }
        self.buf.extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Splits a compressed buffer into its declared decompressed size and the
/// compressed stream. For `None` the size is the buffer length.
pub(crate) fn split_prefix(
    ct: CompressionType,
    block: &ChunkBytes,
) -> Result<(u64, ChunkBytes), DecodeFault> {
    if ct == CompressionType::None {
        return Ok((block.len(), block.clone()));
    }
    let head = block.prefix(10);
    let (size, n) = crate::varint::read_u64(&head)
        .ok_or_else(|| DecodeFault::Corrupt("bad decompressed-size varint".into()))?;
    let rest = block
        .skip(n as u64)
        .ok_or_else(|| DecodeFault::Corrupt("bad compressed buffer".into()))?;
    Ok((size, rest))
}

/// Decompresses `stream` (a compressed stream without its size prefix) into
/// `out`, checking that exactly `expected` bytes come out.
pub(crate) fn decompress_into(
    ct: CompressionType,
    stream: &ChunkBytes,
    expected: u64,
    out: &mut dyn Write,
) -> Result<(), DecodeFault> {
    let mut sink = LimitedSink {
        out,
        written: 0,
        limit: expected,
    };
    match ct {
        CompressionType::None => {
            if stream.len() != expected {
                return Err(size_mismatch(stream.len(), expected));
            }
            stream.write_to(&mut sink).map_err(|e| classify(e, true))?;
        }
        CompressionType::Brotli => match brotli_raw::scan(stream) {
            Some(segments) => {
                let total: u64 = segments.iter().map(|s| s.len()).sum();
                if total != expected {
                    return Err(size_mismatch(total, expected));
                }
                for seg in &segments {
                    seg.write_to(&mut sink).map_err(|e| classify(e, true))?;
                }
            }
            None => brotli_stream(stream, &mut sink)?,
        },
        CompressionType::Zstd => {
            let mut decoder = zstd::stream::read::Decoder::with_buffer(stream.reader())
                .map_err(|e| DecodeFault::Decompression(e.to_string()))?;
            pump(&mut decoder, &mut sink)?;
        }
        CompressionType::Snappy => {
            let data = snappy_decompress(stream, expected)?;
            sink.write_all(&data).map_err(|e| classify(e, true))?;
        }
    }
    if sink.written != expected {
        return Err(size_mismatch(sink.written, expected));
    }
    Ok(())
}

/// Marker error: a [`WindowSink`] has passed on everything it wanted; the decompressor may stop.
#[derive(Debug)]
struct Stop;

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the wanted range has been written")
    }
}

impl std::error::Error for Stop {}

/// A sink that passes on only bytes `[start, end)` of what it is given, and stops the
/// decompressor (with [`Stop`]) once it has them.
struct WindowSink<'a> {
    out: &'a mut dyn Write,
    pos: u64,
    start: u64,
    end: u64,
}

impl Write for WindowSink<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let from = self.pos;
        let to = from + buf.len() as u64;
        let lo = from.max(self.start);
        let hi = to.min(self.end);
        if lo < hi {
            self.out
                .write_all(&buf[(lo - from) as usize..(hi - from) as usize])?;
        }
        self.pos = to;
        if self.pos >= self.end {
            return Err(io::Error::other(Stop));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// Decompresses `stream` (declared to hold `expected` bytes) only as far as needed to write
/// its bytes `[start, start + len)` to `out`, holding no more than one decoder buffer. The
/// rest of the stream is not decoded.
pub(crate) fn decompress_range(
    ct: CompressionType,
    stream: &ChunkBytes,
    expected: u64,
    start: u64,
    len: u64,
    out: &mut dyn Write,
) -> Result<(), DecodeFault> {
    let end = start
        .checked_add(len)
        .filter(|&end| end <= expected)
        .ok_or_else(|| {
            DecodeFault::Corrupt(format!("record range past the {expected} decoded bytes"))
        })?;
    if len == 0 {
        return Ok(());
    }
    // Stored bytes: the range is read where it lies, not streamed from the chunk's start.
    if ct == CompressionType::None {
        if stream.len() != expected {
            return Err(size_mismatch(stream.len(), expected));
        }
        let range = stream
            .slice(start, len)
            .expect("start + len <= expected == stream.len()");
        return range.write_to(out).map_err(|e| classify(e, true));
    }
    let mut window = WindowSink {
        out,
        pos: 0,
        start,
        end,
    };
    match decompress_into(ct, stream, expected, &mut window) {
        Ok(()) => Ok(()),
        Err(DecodeFault::Io(e)) if e.get_ref().is_some_and(|inner| inner.is::<Stop>()) => Ok(()),
        Err(e) => Err(e),
    }
}

/// Decompresses `stream` without keeping its output, checking that exactly `expected` bytes
/// come out; holds no more than one decoder buffer (raw Snappy, which decodes whole, excepted:
/// at most 32 times its input).
pub(crate) fn check_decompresses(
    ct: CompressionType,
    stream: &ChunkBytes,
    expected: u64,
) -> Result<(), DecodeFault> {
    decompress_into(ct, stream, expected, &mut io::sink())
}

/// Decompresses `stream` into a new buffer of exactly `expected` bytes.
pub(crate) fn decompress_to_vec(
    ct: CompressionType,
    stream: &ChunkBytes,
    expected: u64,
) -> Result<Vec<u8>, DecodeFault> {
    if ct == CompressionType::Snappy {
        return snappy_decompress(stream, expected);
    }
    let mut out = GrowingVec {
        buf: Vec::with_capacity(initial_capacity(expected, stream.len())),
        limit: expected,
    };
    decompress_into(ct, stream, expected, &mut out)?;
    Ok(out.buf)
}

/// Copies everything `src` yields into `sink` through one large buffer.
fn pump(src: &mut dyn Read, sink: &mut LimitedSink<'_>) -> Result<(), DecodeFault> {
    let mut buf = vec![0u8; STREAM_BUFFER];
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(classify(e, false)),
        };
        sink.write_all(&buf[..n]).map_err(|e| classify(e, true))?;
    }
}

/// Streams a Brotli stream through the decoder, feeding the file pieces
/// directly and rejecting trailing bytes after the end of the stream.
fn brotli_stream(stream: &ChunkBytes, sink: &mut LimitedSink<'_>) -> Result<(), DecodeFault> {
    // Google's C decoder (through `brotlic`, built from source by cargo): measured about 1.4x
    // faster than the pure-Rust decoder on Brotli-compressed float tensors, which is what
    // bounds merging a TensorFlow-written `.cpb`. Standard windows only (the C default, as in
    // Riegeli): the large-window extension would let a hostile stream demand a 1 GiB buffer.
    let mut decoder = brotlic::BrotliDecoder::new();
    let mut buf = vec![0u8; STREAM_BUFFER];
    let mut finished = false;
    for piece in stream.pieces() {
        let mut input: &[u8] = piece;
        while !input.is_empty() {
            if finished {
                return Err(DecodeFault::Decompression(
                    "data after the end of the Brotli stream".into(),
                ));
            }
            let r = decoder
                .decompress(input, &mut buf)
                .map_err(|e| DecodeFault::Decompression(format!("invalid Brotli stream: {e}")))?;
            input = &input[r.bytes_read..];
            sink.write_all(&buf[..r.bytes_written])
                .map_err(|e| classify(e, true))?;
            match r.info {
                brotlic::decode::DecoderInfo::Finished => finished = true,
                brotlic::decode::DecoderInfo::NeedsMoreInput => {
                    if !input.is_empty() && r.bytes_read == 0 {
                        return Err(DecodeFault::Decompression("Brotli decoder stalled".into()));
                    }
                }
                brotlic::decode::DecoderInfo::NeedsMoreOutput => {}
            }
        }
    }
    // Drain output the decoder still holds.
    while !finished {
        let r = decoder
            .decompress(&[], &mut buf)
            .map_err(|e| DecodeFault::Decompression(format!("invalid Brotli stream: {e}")))?;
        sink.write_all(&buf[..r.bytes_written])
            .map_err(|e| classify(e, true))?;
        match r.info {
            brotlic::decode::DecoderInfo::Finished => finished = true,
            brotlic::decode::DecoderInfo::NeedsMoreOutput => {}
            brotlic::decode::DecoderInfo::NeedsMoreInput => {
                return Err(DecodeFault::Decompression("truncated Brotli stream".into()))
            }
        }
    }
    Ok(())
}

/// Decompresses raw Snappy (needs the whole input and output at once).
fn snappy_decompress(stream: &ChunkBytes, expected: u64) -> Result<Vec<u8>, DecodeFault> {
    let input = stream.to_bytes();
    let declared =
        snap::raw::decompress_len(&input).map_err(|e| DecodeFault::Decompression(e.to_string()))?;
    if declared as u64 != expected {
        return Err(size_mismatch(declared as u64, expected));
    }
    // A Snappy element of n input bytes yields at most 64 bytes per 2 input
    // bytes; refuse sizes the input cannot possibly produce before allocating.
    if expected > (input.len() as u64).saturating_mul(32).saturating_add(64) {
        return Err(DecodeFault::Decompression(format!(
            "Snappy stream of {} bytes cannot decompress to {expected} bytes",
            input.len()
        )));
    }
    let mut out = vec![0u8; declared];
    let n = snap::raw::Decoder::new()
        .decompress(&input, &mut out)
        .map_err(|e| DecodeFault::Decompression(e.to_string()))?;
    if n as u64 != expected {
        return Err(size_mismatch(n as u64, expected));
    }
    Ok(out)
}

/// The fault for a decompressed size that differs from the declared one.
fn size_mismatch(got: u64, expected: u64) -> DecodeFault {
    DecodeFault::Decompression(format!(
        "decompressed to {got} bytes but {expected} were declared"
    ))
}

/// A streaming compressor for one buffer of a chunk (writer side).
pub(crate) struct Compressor {
    kind: CompressorKind,
    uncompressed_len: u64,
}

/// The per-algorithm state of a [`Compressor`].
enum CompressorKind {
    None(Vec<u8>),
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    Zstd(zstd::stream::write::Encoder<'static, Vec<u8>>),
    Snappy(Vec<u8>),
}

impl Compressor {
    /// Starts a buffer compressed with `c`; `size_hint` is the expected
    /// uncompressed size (0 when unknown).
    pub(crate) fn new(c: Compression, size_hint: u64) -> io::Result<Compressor> {
        let kind = match c {
            Compression::None => CompressorKind::None(Vec::new()),
            Compression::Brotli { level } => {
                let params = brotli::enc::BrotliEncoderParams {
                    quality: level.min(11) as i32,
                    lgwin: 22,
                    size_hint: usize::try_from(size_hint).unwrap_or(usize::MAX),
                    ..Default::default()
                };
                CompressorKind::Brotli(Box::new(brotli::CompressorWriter::with_params(
                    Vec::new(),
                    1 << 16,
                    &params,
                )))
            }
            Compression::Zstd { level } => {
                let mut enc = zstd::stream::write::Encoder::new(Vec::new(), level)?;
                enc.include_checksum(false)?;
                CompressorKind::Zstd(enc)
            }
            Compression::Snappy => CompressorKind::Snappy(Vec::new()),
        };
        Ok(Compressor {
            kind,
            uncompressed_len: 0,
        })
    }

    /// Uncompressed bytes written so far.
    pub(crate) fn uncompressed_len(&self) -> u64 {
        self.uncompressed_len
    }

    /// Appends uncompressed bytes.
    pub(crate) fn write(&mut self, data: &[u8]) -> io::Result<()> {
        self.uncompressed_len += data.len() as u64;
        match &mut self.kind {
            CompressorKind::None(v) | CompressorKind::Snappy(v) => {
                v.extend_from_slice(data);
                Ok(())
            }
            CompressorKind::Brotli(w) => w.write_all(data),
            CompressorKind::Zstd(w) => w.write_all(data),
        }
    }

    /// Finishes the buffer: returns its parts as stored in the chunk (the
    /// size prefix, when compressed, then the stream).
    pub(crate) fn finish(self) -> io::Result<Vec<Vec<u8>>> {
        let stream = match self.kind {
            CompressorKind::None(v) => return Ok(vec![v]),
            CompressorKind::Brotli(w) => w.into_inner(),
            CompressorKind::Zstd(w) => w.finish()?,
            CompressorKind::Snappy(v) => {
                if snap::raw::max_compress_len(v.len()) == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!("{} bytes is too large for raw Snappy", v.len()),
                    ));
                }
                snap::raw::Encoder::new()
                    .compress_vec(&v)
                    .map_err(io::Error::other)?
            }
        };
        let mut prefix = Vec::with_capacity(10);
        crate::varint::write_u64(&mut prefix, self.uncompressed_len);
        Ok(vec![prefix, stream])
    }
}

/// `data`, compressed with Zstd at `level` as one buffer of a chunk, as a [`Compressor`] fed
/// all of it gives it (the size prefix, then the stream), but in one call, reading `data`
/// where it lies: the streaming encoder copied every byte into its window first and matched
/// across the window's wrap (issue 15: a tenth of the compression of a split of millions of
/// nodes, whose chunks are each one slice of the model file). The stream is a valid Zstd
/// frame either way; this one also declares its content size.
pub(crate) fn zstd_whole(level: i32, data: &[u8]) -> io::Result<Vec<Vec<u8>>> {
    let mut zstd = zstd::bulk::Compressor::new(level)?;
    zstd.set_parameter(zstd::stream::raw::CParameter::ChecksumFlag(false))?;
    let stream = zstd.compress(data)?;
    let mut prefix = Vec::with_capacity(10);
    crate::varint::write_u64(&mut prefix, data.len() as u64);
    Ok(vec![prefix, stream])
}

/// Compresses `sample` with `c` and reports whether the result saves at
/// least 10%: the cheap test behind `store_incompressible`.
pub(crate) fn worth_compressing(c: Compression, sample: &[u8]) -> bool {
    if sample.is_empty() || c == Compression::None {
        return c != Compression::None;
    }
    let compressed_len = match Compressor::new(c, sample.len() as u64).and_then(|mut comp| {
        comp.write(sample)?;
        comp.finish()
    }) {
        Ok(parts) => parts.iter().map(|p| p.len()).sum::<usize>(),
        Err(_) => return false,
    };
    (compressed_len as u64) * 10 <= (sample.len() as u64) * 9
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn roundtrip(c: Compression, data: &[u8]) {
        let mut comp = Compressor::new(c, data.len() as u64).expect("new");
        for part in data.chunks(1000) {
            comp.write(part).expect("write");
        }
        let block: Vec<u8> = comp.finish().expect("finish").concat();
        let view = ChunkBytes::plain(Bytes::from(block));
        let ct = c.compression_type();
        let (size, stream) = split_prefix(ct, &view).expect("prefix");
        assert_eq!(size, data.len() as u64);
        assert_eq!(
            decompress_to_vec(ct, &stream, size).expect("decompress"),
            data
        );
        // A wrong declared size is rejected.
        assert!(decompress_to_vec(ct, &stream, size + 1).is_err());
        if size > 0 {
            assert!(decompress_to_vec(ct, &stream, size - 1).is_err());
        }
    }

    #[test]
    fn all_codecs_roundtrip() {
        let text: Vec<u8> = b"riegeli records "
            .iter()
            .copied()
            .cycle()
            .take(100_000)
            .collect();
        let mut noise = vec![0u8; 300_000];
        let mut x = 0x1234_5678_9abc_def0u64;
        for b in noise.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        for c in [
            Compression::None,
            Compression::Brotli { level: 6 },
            Compression::Zstd { level: 3 },
            Compression::Snappy,
        ] {
            roundtrip(c, &text);
            roundtrip(c, &noise);
            roundtrip(c, &[]);
        }
    }

    #[test]
    fn incompressible_detection() {
        let mut noise = vec![0u8; 65_536];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for b in noise.iter_mut() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
        assert!(!worth_compressing(Compression::Brotli { level: 6 }, &noise));
        assert!(worth_compressing(
            Compression::Brotli { level: 6 },
            &[7u8; 65_536]
        ));
    }
}
