//! Streaming the raw bytes of a fixed-size tensor: in 1 MiB pieces read with `pread` into one
//! reused buffer (resident memory stays at one piece however large the tensor), the checksum
//! computed on the way and compared at the end. (Letting the kernel copy the pieces with
//! `copy_file_range` instead of writing them measured no faster.)

use std::fs::File;
use std::io::Write;

use crate::crc;
use crate::dtype::{storage, tf_name, Storage};
use crate::error::{BundleError, Result};
use crate::reader::{check_crc, BundleReader};

/// Size of the pieces streamed: small enough to stay in cache between checksumming and
/// writing, large enough to amortize each call.
pub const CHUNK_SIZE: usize = 1 << 20;

impl BundleReader {
    /// Calls `f` with consecutive pieces (at most [`CHUNK_SIZE`] bytes) of the raw
    /// little-endian bytes of a fixed-size tensor (a partitioned one assembled first),
    /// checking the checksum on the way: an error if it does not match at the end, after `f`
    /// saw every piece. Returns the byte count.
    pub fn for_each_raw_chunk<E: From<BundleError>>(
        &self,
        key: impl AsRef<[u8]>,
        f: impl FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<u64, E> {
        self.stream(key.as_ref(), f)
    }

    /// Writes the raw bytes of a fixed-size tensor to `out`; see [`Self::for_each_raw_chunk`].
    /// On a checksum mismatch the bytes are already written and an error is returned: write
    /// to a temporary file and discard it on error.
    pub fn copy_raw_to(&self, key: impl AsRef<[u8]>, out: &mut dyn Write) -> Result<u64> {
        self.for_each_raw_chunk(key, |piece| {
            out.write_all(piece)
                .map_err(|e| BundleError::io("(output)", e))
        })
    }

    fn stream<E: From<BundleError>>(
        &self,
        key: &[u8],
        mut f: impl FnMut(&[u8]) -> std::result::Result<(), E>,
    ) -> std::result::Result<u64, E> {
        let entry = self.lookup(key)?;
        if !matches!(storage(entry.dtype), Storage::Fixed(_) | Storage::Opaque) {
            return Err(BundleError::Unsupported {
                key: crate::display_key(key),
                what: format!("{} values have no raw byte form", tf_name(entry.dtype)),
            }
            .into());
        }
        if !entry.slices.is_empty() {
            let t = self.read_partitioned(key, entry)?;
            let bytes = t.as_raw().cloned().unwrap_or_default();
            for piece in bytes.chunks(CHUNK_SIZE) {
                f(piece)?;
            }
            return Ok(bytes.len() as u64);
        }
        // Sizes and offsets checked against the mapped file first.
        let (path, bytes) = self.checked_bytes(key, entry)?;
        let (start, len) = (entry.offset as u64, bytes.len() as u64);
        drop(bytes);
        let file = unbound_io::open_regular(&path)
            .map_err(BundleError::from)?
            .0;
        let mut buf = vec![0u8; CHUNK_SIZE.min(len as usize)];
        let mut c = 0;
        let mut done = 0u64;
        while done < len {
            let n = (len - done).min(CHUNK_SIZE as u64) as usize;
            let at = start + done;
            read_exact_at(&file, &mut buf[..n], at).map_err(|e| {
                BundleError::tensor(&path, key, format!("read failed at byte {at}: {e}"))
            })?;
            c = crc::extend(c, &buf[..n]);
            f(&buf[..n])?;
            done += n as u64;
        }
        check_crc(&path, key, entry, c)?;
        Ok(len)
    }
}

/// Reads exactly `buf.len()` bytes at `offset`.
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(buf, offset)
    }
    #[cfg(not(unix))]
    {
        use std::io::{Read, Seek, SeekFrom};
        let mut f = file;
        f.seek(SeekFrom::Start(offset))?;
        f.read_exact(buf)
    }
}
