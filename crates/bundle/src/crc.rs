//! CRC32C as TensorFlow and LevelDB store it: masked, so that a CRC of data holding CRCs stays
//! well distributed. The `crc32c` crate uses the SSE 4.2 / ARMv8 CRC instructions when the CPU
//! has them (detected at run time) and a table-driven fallback otherwise.

const MASK_DELTA: u32 = 0xa282_ead8;

/// CRC32C of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Extends `crc` (of earlier bytes) over `data`.
pub fn extend(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// TensorFlow's `crc32c::Mask`: rotate right by 15 bits and add a constant.
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Inverse of [`mask`].
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // RFC 3720 test vectors.
        assert_eq!(crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(crc32c(&[0xffu8; 32]), 0x62a8_ab43);
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(extend(crc32c(b"1234"), b"56789"), 0xe306_9283);
    }

    #[test]
    fn mask_round_trips_and_differs() {
        for c in [0u32, 1, 0xe306_9283, u32::MAX] {
            assert_eq!(unmask(mask(c)), c);
            assert_ne!(mask(c), c);
            assert_ne!(mask(mask(c)), mask(c));
        }
    }
}
