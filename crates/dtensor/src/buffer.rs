//! The bytes of a fixed-size host array: a heap vector, or for large arrays an anonymous
//! memory map that asks the kernel for transparent huge pages, so that first writes fault
//! in 2 MiB at a time instead of 4 KiB (what NumPy does for its large arrays too).

use std::ops::{Deref, DerefMut};

/// Arrays from this size on are mapped rather than allocated on the heap.
const MAP_FROM: usize = 4 << 20;

/// Bytes of a host array (dereferences to `[u8]`).
pub struct ByteBuffer(Repr);

enum Repr {
    Heap(Vec<u8>),
    Map(memmap2::MmapMut),
}

impl ByteBuffer {
    /// `len` zero bytes: mapped (huge pages advised, where the platform has them) from
    /// 4 MiB on, on the heap below that or when mapping fails.
    pub fn zeroed(len: usize) -> ByteBuffer {
        if len >= MAP_FROM {
            if let Ok(map) = memmap2::MmapMut::map_anon(len) {
                #[cfg(target_os = "linux")]
                let _ = map.advise(memmap2::Advice::HugePage); // advice only: fine to ignore
                return ByteBuffer(Repr::Map(map));
            }
        }
        ByteBuffer(Repr::Heap(vec![0; len]))
    }

    /// The bytes of `v`, kept where they are.
    pub fn from_vec(v: Vec<u8>) -> ByteBuffer {
        ByteBuffer(Repr::Heap(v))
    }

    /// The bytes as a vector (a copy if they are mapped).
    pub fn into_vec(self) -> Vec<u8> {
        match self.0 {
            Repr::Heap(v) => v,
            Repr::Map(m) => m.to_vec(),
        }
    }
}

impl Deref for ByteBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Heap(v) => v,
            Repr::Map(m) => m,
        }
    }
}

impl DerefMut for ByteBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        match &mut self.0 {
            Repr::Heap(v) => v,
            Repr::Map(m) => m,
        }
    }
}

impl Clone for ByteBuffer {
    fn clone(&self) -> ByteBuffer {
        let mut out = ByteBuffer::zeroed(self.len());
        out.copy_from_slice(self);
        out
    }
}

impl PartialEq for ByteBuffer {
    fn eq(&self, other: &ByteBuffer) -> bool {
        **self == **other
    }
}

impl Eq for ByteBuffer {}

impl std::fmt::Debug for ByteBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let head = &self[..self.len().min(16)];
        write!(
            f,
            "ByteBuffer({} bytes: {head:02x?}{})",
            self.len(),
            if self.len() > 16 { " ..." } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_mapped_buffers_behave_alike() {
        for len in [0, 10, MAP_FROM, MAP_FROM + 3] {
            let mut b = ByteBuffer::zeroed(len);
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0));
            if len > 0 {
                b[len - 1] = 7;
            }
            let c = b.clone();
            assert_eq!(c, b);
            assert_eq!(c.into_vec().last().copied(), (len > 0).then_some(7));
        }
    }
}
