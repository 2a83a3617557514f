//! Riegeli files as the [`RecordSource`] of lazy wire values.

use std::io::Write;
use std::sync::Arc;

use bytes::Bytes;
use unbound_records::{CompressionType, RecordReader};
use unbound_wire::{RecordSource, SourceError};

/// A Riegeli file whose records lazy [`unbound_wire::Payload::Record`] values point into.
#[derive(Debug, Clone)]
pub struct RecordFile(pub Arc<RecordReader>);

impl RecordSource for RecordFile {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn read_record(&self, position: u64) -> Result<Bytes, SourceError> {
        Ok(self.0.read_record_at(position)?.1)
    }

    fn copy_record_to(&self, position: u64, out: &mut dyn Write) -> Result<u64, SourceError> {
        Ok(self.0.copy_record_to(position, out)?)
    }

    fn decoding_is_costly(&self, position: u64) -> bool {
        match self.0.chunk_of(position) {
            Ok(c) => {
                let compressed = !matches!(c.compression, None | Some(CompressionType::None));
                // Brotli's stored meta-blocks keep the size; real compression shrinks it.
                compressed
                    && c.data_size.saturating_mul(100) < c.decoded_data_size.saturating_mul(99)
            }
            Err(_) => false, // the error surfaces when the record is streamed
        }
    }
}
