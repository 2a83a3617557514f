//! [`RecordSource`]: where lazy values come from. The wire layer knows records only through
//! this trait, so it needs neither the Riegeli reader nor its C decompressors; `unbound-chunked`
//! implements it for Riegeli files.

use std::fmt;
use std::io::Write;

use bytes::Bytes;

/// The error a [`RecordSource`] reports; the wire layer passes it through untouched.
pub type SourceError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// A file of numbered records that [`crate::Payload::Record`] values are read from.
pub trait RecordSource: fmt::Debug + Send + Sync {
    /// The file's name, for errors.
    fn name(&self) -> &str;

    /// The record at `position`, decoded.
    fn read_record(&self, position: u64) -> Result<Bytes, SourceError>;

    /// Writes the record at `position` to `out` (piece by piece when it is large); returns the
    /// number of bytes written.
    fn copy_record_to(&self, position: u64, out: &mut dyn Write) -> Result<u64, SourceError>;

    /// Writes `len` bytes of the record at `position`, from its byte `offset`, to `out`
    /// (a value inside a large record); returns `len`. The default streams the record from
    /// its start and discards the bytes before `offset`; a source that can reach the range
    /// directly (stored bytes, a decoded buffer) overrides it. A record that ends before the
    /// range does is an error.
    fn copy_record_range_to(
        &self,
        position: u64,
        offset: u64,
        len: u64,
        out: &mut dyn Write,
    ) -> Result<u64, SourceError> {
        let mut window = Window {
            skip: offset,
            left: len,
            out,
        };
        let copied = self.copy_record_to(position, &mut window);
        // Once the range is whole the window refuses more, which stops the decompression.
        if window.left == 0 {
            return Ok(len);
        }
        copied?;
        Err(format!(
            "{}: record at {position} ended {} bytes before the value at {offset} of {len} bytes",
            self.name(),
            window.left,
        )
        .into())
    }

    /// Whether reading the record at `position` costs real decompression (not just a copy):
    /// such records are worth decoding ahead on worker threads.
    fn decoding_is_costly(&self, position: u64) -> bool;

    /// For a source whose "records" are values inside the records of a file (a large value
    /// of a chunk parsed as it streamed), where the value starts in its record; `None` for a
    /// source of whole records.
    fn offset_in_record(&self) -> Option<u64> {
        None
    }

    /// For a source of values inside records ([`RecordSource::offset_in_record`]), the source
    /// of the whole records they lie in: several values of one record can then be read in one
    /// pass over it instead of one pass each from its start. `None` for a source of whole
    /// records.
    fn record_file(&self) -> Option<&std::sync::Arc<Box<dyn RecordSource>>> {
        None
    }
}

/// Writes the bytes of a stream from `skip` on, `left` of them, to `out`; refuses more.
struct Window<'a> {
    skip: u64,
    left: u64,
    out: &'a mut dyn Write,
}

impl Write for Window<'_> {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::other("the value is whole"));
        }
        let skipped = self.skip.min(data.len() as u64) as usize;
        self.skip -= skipped as u64;
        let rest = &data[skipped..];
        let n = self.left.min(rest.len() as u64) as usize;
        self.out.write_all(&rest[..n])?;
        self.left -= n as u64;
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }
}
