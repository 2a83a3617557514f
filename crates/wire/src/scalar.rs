//! Scalar values: their wire encoding by field kind, and the text form TensorFlow's Merger
//! parses from BYTES chunks for numeric, bool and enum fields.
//!
//! TensorFlow's `SetFieldElement` uses `std::stoi`/`stoll`/`stoul`/`stoull`/`stod`/`stof`,
//! `istringstream >> boolalpha` and `EnumDescriptor::FindValueByName`. We follow the same rules
//! (leading white space skipped, a numeric prefix accepted, `stoul`'s acceptance of a leading
//! minus sign, out-of-range numbers rejected), with one deliberate difference: where TensorFlow
//! silently stores `false` for a bool that is neither `true` nor `false`, or dereferences a null
//! pointer for an unknown enum name, we report an error.

use prost_reflect::Kind;

use crate::message::{Payload, WireValue};

/// How a scalar kind is laid out on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarWire {
    /// Varint (int32, int64, uint32, uint64, sint32, sint64, bool, enum).
    Varint,
    /// Four bytes (fixed32, sfixed32, float).
    Fixed32,
    /// Eight bytes (fixed64, sfixed64, double).
    Fixed64,
    /// Length-delimited (string, bytes).
    Len,
}

/// The wire layout of a non-message kind; `None` for messages.
pub fn scalar_wire(kind: &Kind) -> Option<ScalarWire> {
    Some(match kind {
        Kind::Int32
        | Kind::Int64
        | Kind::Uint32
        | Kind::Uint64
        | Kind::Sint32
        | Kind::Sint64
        | Kind::Bool
        | Kind::Enum(_) => ScalarWire::Varint,
        Kind::Fixed32 | Kind::Sfixed32 | Kind::Float => ScalarWire::Fixed32,
        Kind::Fixed64 | Kind::Sfixed64 | Kind::Double => ScalarWire::Fixed64,
        Kind::String | Kind::Bytes => ScalarWire::Len,
        Kind::Message(_) => return None,
    })
}

/// A scalar in a kind-neutral form, before encoding.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    /// Any signed integer kind (also enums).
    Signed(i64),
    /// Any unsigned integer kind.
    Unsigned(u64),
    /// bool.
    Bool(bool),
    /// double or float.
    Float(f64),
    /// string or bytes.
    Bytes(Vec<u8>),
}

/// Encodes `value` as a field of `kind` would carry it. `None` if the two do not fit.
pub fn encode_scalar(kind: &Kind, value: &Scalar) -> Option<WireValue> {
    use Scalar::*;
    Some(match (kind, value) {
        (Kind::Int32 | Kind::Int64 | Kind::Enum(_), Signed(v)) => WireValue::Varint(*v as u64),
        (Kind::Int32 | Kind::Int64, Unsigned(v)) => WireValue::Varint(*v),
        (Kind::Uint32, Unsigned(v)) => WireValue::Varint(u64::from(*v as u32)),
        (Kind::Uint64, Unsigned(v)) => WireValue::Varint(*v),
        (Kind::Uint32 | Kind::Uint64, Signed(v)) => WireValue::Varint(*v as u64),
        (Kind::Sint32 | Kind::Sint64, Signed(v)) => WireValue::Varint(zigzag(*v)),
        (Kind::Sint32 | Kind::Sint64, Unsigned(v)) => WireValue::Varint(zigzag(*v as i64)),
        (Kind::Fixed32, Unsigned(v)) => WireValue::Fixed32(*v as u32),
        (Kind::Fixed32 | Kind::Sfixed32, Signed(v)) => WireValue::Fixed32(*v as u32),
        (Kind::Sfixed32, Unsigned(v)) => WireValue::Fixed32(*v as u32),
        (Kind::Fixed64 | Kind::Sfixed64, Unsigned(v)) => WireValue::Fixed64(*v),
        (Kind::Fixed64 | Kind::Sfixed64, Signed(v)) => WireValue::Fixed64(*v as u64),
        (Kind::Bool, Bool(b)) => WireValue::Varint(u64::from(*b)),
        (Kind::Bool, Signed(v)) => WireValue::Varint(u64::from(*v != 0)),
        (Kind::Bool, Unsigned(v)) => WireValue::Varint(u64::from(*v != 0)),
        (Kind::Int32 | Kind::Int64 | Kind::Uint32 | Kind::Uint64, Bool(b)) => {
            WireValue::Varint(u64::from(*b))
        }
        (Kind::Float, Float(f)) => WireValue::Fixed32((*f as f32).to_bits()),
        (Kind::Double, Float(f)) => WireValue::Fixed64(f.to_bits()),
        (Kind::String | Kind::Bytes, Bytes(b)) => {
            WireValue::Bytes(Payload::Inline(bytes::Bytes::copy_from_slice(b)))
        }
        _ => return None,
    })
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Parses the text of a BYTES chunk into a value for a numeric, bool or enum field.
/// On failure returns a short name of what was expected.
pub fn parse_text_scalar(kind: &Kind, text: &[u8]) -> Result<WireValue, &'static str> {
    let text = std::str::from_utf8(text).map_err(|_| "UTF-8 text")?;
    let scalar = match kind {
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
            let v = parse_signed(text).ok_or("int32 (std::stoi)")?;
            i32::try_from(v).map_err(|_| "int32 in range (std::stoi)")?;
            Scalar::Signed(v)
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
            Scalar::Signed(parse_signed(text).ok_or("int64 (std::stoll)")?)
        }
        // std::stoul returns an unsigned long; TensorFlow then narrows it to uint32.
        Kind::Uint32 | Kind::Fixed32 => {
            Scalar::Unsigned(parse_unsigned(text).ok_or("uint32 (std::stoul)")? & 0xffff_ffff)
        }
        Kind::Uint64 | Kind::Fixed64 => {
            Scalar::Unsigned(parse_unsigned(text).ok_or("uint64 (std::stoull)")?)
        }
        Kind::Double => Scalar::Float(parse_float(text).ok_or("double (std::stod)")?),
        Kind::Float => {
            let v = parse_float(text).ok_or("float (std::stof)")?;
            if v.is_finite() && (v as f32).is_infinite() {
                return Err("float in range (std::stof)");
            }
            Scalar::Float(v)
        }
        Kind::Bool => match text.trim_start() {
            t if t.starts_with("true") => Scalar::Bool(true),
            t if t.starts_with("false") => Scalar::Bool(false),
            _ => return Err("bool (\"true\" or \"false\")"),
        },
        Kind::Enum(e) => {
            let value = e.get_value_by_name(text).ok_or("enum value name")?;
            Scalar::Signed(i64::from(value.number()))
        }
        Kind::String | Kind::Bytes => Scalar::Bytes(text.as_bytes().to_vec()),
        Kind::Message(_) => return Err("scalar (the field is a message)"),
    };
    encode_scalar(kind, &scalar).ok_or("scalar of the field's kind")
}

/// Splits leading white space, an optional sign and a run of decimal digits, C style.
fn sign_and_digits(text: &str) -> Option<(bool, &str)> {
    let t = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (negative, rest) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0).then(|| (negative, &rest[..digits]))
}

/// `strtoll` base 10, failing on no digits or overflow.
fn parse_signed(text: &str) -> Option<i64> {
    let (negative, digits) = sign_and_digits(text)?;
    let magnitude: i128 = digits.parse().ok()?;
    let value = if negative { -magnitude } else { magnitude };
    i64::try_from(value).ok()
}

/// `strtoull` base 10: a leading minus negates modulo 2^64; overflow fails.
fn parse_unsigned(text: &str) -> Option<u64> {
    let (negative, digits) = sign_and_digits(text)?;
    let magnitude: u64 = digits.parse().ok()?;
    Some(if negative {
        magnitude.wrapping_neg()
    } else {
        magnitude
    })
}

/// `strtod` on the longest decimal prefix (also `inf`, `infinity`, `nan`); fails on no number
/// or on overflow. Hexadecimal floats are not accepted.
fn parse_float(text: &str) -> Option<f64> {
    let t = text.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let b = t.as_bytes();
    let mut i = 0;
    if matches!(b.first(), Some(b'+' | b'-')) {
        i = 1;
    }
    let lower = t[i..].to_ascii_lowercase();
    for word in ["infinity", "inf", "nan"] {
        if lower.starts_with(word) {
            let v: f64 = t[..i + word.len()].parse().ok()?;
            return Some(v);
        }
    }
    let int_digits = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
    i += int_digits;
    let mut frac_digits = 0;
    if b.get(i) == Some(&b'.') {
        frac_digits = b[i + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
        i += 1 + frac_digits;
    }
    if int_digits + frac_digits == 0 {
        return None;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        let mut j = i + 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let exp_digits = b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
        if exp_digits > 0 {
            i = j + exp_digits;
        }
    }
    let v: f64 = t[..i].parse().ok()?;
    v.is_finite().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_follow_c_rules() {
        assert_eq!(parse_signed("  42abc"), Some(42));
        assert_eq!(parse_signed("-7"), Some(-7));
        assert_eq!(parse_signed("abc"), None);
        assert_eq!(parse_signed("99999999999999999999"), None);
        assert_eq!(parse_unsigned("-1"), Some(u64::MAX));
        assert!(matches!(
            parse_text_scalar(&Kind::Int32, b"3000000000"),
            Err("int32 in range (std::stoi)")
        ));
        assert!(matches!(
            parse_text_scalar(&Kind::Int32, b"-5"),
            Ok(WireValue::Varint(v)) if v == (-5i64) as u64
        ));
        assert!(matches!(
            parse_text_scalar(&Kind::Uint32, b"-1"),
            Ok(WireValue::Varint(0xffff_ffff))
        ));
        assert!(matches!(
            parse_text_scalar(&Kind::Sint64, b"-1"),
            Ok(WireValue::Varint(1))
        ));
    }

    #[test]
    fn floats_and_bools() {
        assert_eq!(parse_float("1.5e3xyz"), Some(1500.0));
        assert_eq!(parse_float(" -.25"), Some(-0.25));
        assert_eq!(parse_float("1e999"), None);
        assert!(parse_float("inf").unwrap().is_infinite());
        assert_eq!(parse_float("."), None);
        assert!(matches!(
            parse_text_scalar(&Kind::Float, b"0.5"),
            Ok(WireValue::Fixed32(v)) if v == 0.5f32.to_bits()
        ));
        assert!(matches!(
            parse_text_scalar(&Kind::Bool, b"true"),
            Ok(WireValue::Varint(1))
        ));
        assert!(parse_text_scalar(&Kind::Bool, b"1").is_err());
    }
}
