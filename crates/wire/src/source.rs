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

    /// Whether reading the record at `position` costs real decompression (not just a copy):
    /// such records are worth decoding ahead on worker threads.
    fn decoding_is_costly(&self, position: u64) -> bool;

    /// For a source whose "records" are values inside the records of a file (a large value
    /// of a chunk parsed as it streamed), where the value starts in its record; `None` for a
    /// source of whole records.
    fn offset_in_record(&self) -> Option<u64> {
        None
    }
}
