//! Where an encoding goes: bytes are handed over in order, in pieces of any size.

use crate::farmhash::Fingerprint64;

/// Receives the bytes of an encoding in order.
pub trait Sink {
    /// Takes the next `bytes`.
    fn write(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn write(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Hashes the encoding as it is written: it is never held whole.
impl Sink for Fingerprint64 {
    fn write(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

/// Counts the bytes and drops them.
#[derive(Default)]
pub struct Count(pub u64);

impl Sink for Count {
    fn write(&mut self, bytes: &[u8]) {
        self.0 += bytes.len() as u64;
    }
}
