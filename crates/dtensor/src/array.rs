//! Host arrays: a shape and C-order elements, either fixed-size (any dtype, as bytes) or
//! variable-length byte strings.

use crate::buffer::ByteBuffer;
use crate::error::{DTensorError, Result};

/// The elements of a host array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Elements {
    /// Fixed-size elements of `itemsize` bytes each (numbers, bool, bfloat16, complex,
    /// fixed-width strings): moved as bytes, never interpreted.
    Fixed {
        /// Bytes per element.
        itemsize: usize,
        /// The bytes, C order.
        bytes: ByteBuffer,
    },
    /// Variable-length byte strings (TensorFlow `tf.string`), C order.
    Strings(Vec<Vec<u8>>),
}

/// A dense array in host memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostArray {
    shape: Vec<i64>,
    elements: Elements,
}

/// The number of elements of `shape`, or why it has none.
pub(crate) fn element_count(shape: &[i64]) -> Result<usize> {
    shape
        .iter()
        .try_fold(1usize, |acc, &d| {
            usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
        })
        .ok_or_else(|| DTensorError::Data {
            what: format!("shape {shape:?}"),
            fault: "negative or overflowing size".into(),
        })
}

impl HostArray {
    /// An array of fixed-size elements; the byte count must match the shape.
    pub fn from_bytes(shape: Vec<i64>, itemsize: usize, bytes: Vec<u8>) -> Result<HostArray> {
        let n = element_count(&shape)?;
        if itemsize == 0 || n.checked_mul(itemsize) != Some(bytes.len()) {
            return Err(DTensorError::Data {
                what: format!("array of shape {shape:?}"),
                fault: format!(
                    "{} bytes given for {n} elements of {itemsize} bytes",
                    bytes.len()
                ),
            });
        }
        Ok(HostArray {
            shape,
            elements: Elements::Fixed {
                itemsize,
                bytes: ByteBuffer::from_vec(bytes),
            },
        })
    }

    /// An array of byte strings; the count must match the shape.
    pub fn from_strings(shape: Vec<i64>, strings: Vec<Vec<u8>>) -> Result<HostArray> {
        let n = element_count(&shape)?;
        if strings.len() != n {
            return Err(DTensorError::Data {
                what: format!("array of shape {shape:?}"),
                fault: format!("{} strings given for {n} elements", strings.len()),
            });
        }
        Ok(HostArray {
            shape,
            elements: Elements::Strings(strings),
        })
    }

    /// A zero-filled (or empty-string) array of the same element kind as `like`.
    pub(crate) fn zeros_like_kind(like: &Elements, shape: Vec<i64>) -> Result<HostArray> {
        let n = element_count(&shape)?;
        let elements = match like {
            Elements::Fixed { itemsize, .. } => {
                let len = n.checked_mul(*itemsize).ok_or_else(|| DTensorError::Data {
                    what: format!("array of shape {shape:?}"),
                    fault: "size overflows".into(),
                })?;
                Elements::Fixed {
                    itemsize: *itemsize,
                    bytes: ByteBuffer::zeroed(len),
                }
            }
            Elements::Strings(_) => Elements::Strings(vec![Vec::new(); n]),
        };
        Ok(HostArray { shape, elements })
    }

    /// The shape.
    pub fn shape(&self) -> &[i64] {
        &self.shape
    }
    /// The elements.
    pub fn elements(&self) -> &Elements {
        &self.elements
    }
    pub(crate) fn elements_mut(&mut self) -> &mut Elements {
        &mut self.elements
    }
    /// The bytes of a fixed-size array (`None` for strings).
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.elements {
            Elements::Fixed { bytes, .. } => Some(bytes),
            Elements::Strings(_) => None,
        }
    }
    /// The array's parts.
    pub fn into_parts(self) -> (Vec<i64>, Elements) {
        (self.shape, self.elements)
    }
    /// Same element kind (and item size) as `other`.
    pub fn same_kind(&self, other: &HostArray) -> bool {
        match (&self.elements, &other.elements) {
            (Elements::Fixed { itemsize: a, .. }, Elements::Fixed { itemsize: b, .. }) => a == b,
            (Elements::Strings(_), Elements::Strings(_)) => true,
            _ => false,
        }
    }
}
