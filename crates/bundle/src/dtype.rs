//! Element types: their stored size and TensorFlow's names for them.

use unbound_proto::tensorflow::DataType;

/// How a dtype's elements are stored in a data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Storage {
    /// Fixed-size little-endian elements of this many bytes (sub-byte types take a byte each,
    /// as in TensorFlow's memory layout).
    Fixed(usize),
    /// `DT_STRING`: varint lengths, a length checksum, the bytes.
    String,
    /// `DT_VARIANT`: per element a varint length, a serialized `VariantTensorDataProto` and a
    /// running checksum.
    Variant,
    /// Anything else (`DT_RESOURCE`, unknown values): opaque bytes, checked by CRC only.
    Opaque,
}

/// The storage of a dtype (reference types like their base type).
pub fn storage(dtype: i32) -> Storage {
    let base = if dtype > 100 { dtype - 100 } else { dtype };
    let Ok(dt) = DataType::try_from(base) else {
        return Storage::Opaque;
    };
    use DataType::*;
    match dt {
        DtFloat | DtInt32 | DtQint32 | DtUint32 => Storage::Fixed(4),
        DtDouble | DtInt64 | DtUint64 | DtComplex64 => Storage::Fixed(8),
        DtComplex128 => Storage::Fixed(16),
        DtInt16 | DtUint16 | DtQint16 | DtQuint16 | DtBfloat16 | DtHalf => Storage::Fixed(2),
        DtUint8 | DtInt8 | DtBool | DtQint8 | DtQuint8 | DtFloat8E5m2 | DtFloat8E4m3fn
        | DtFloat8E4m3fnuz | DtFloat8E4m3b11fnuz | DtFloat8E5m2fnuz | DtInt4 | DtUint4 | DtInt2
        | DtUint2 | DtFloat4E2m1fn => Storage::Fixed(1),
        DtString => Storage::String,
        DtVariant => Storage::Variant,
        _ => Storage::Opaque,
    }
}

/// The one table of TensorFlow's Python dtype names, by base (non-reference) `DataType`
/// value: `float32`, `string`, `bfloat16`, ...; `None` for `DT_INVALID` and values we do not
/// know.
fn base_name(base: i32) -> Option<&'static str> {
    use DataType::*;
    Some(match DataType::try_from(base).ok()? {
        DtFloat => "float32",
        DtDouble => "float64",
        DtInt32 => "int32",
        DtUint8 => "uint8",
        DtInt16 => "int16",
        DtInt8 => "int8",
        DtString => "string",
        DtComplex64 => "complex64",
        DtInt64 => "int64",
        DtBool => "bool",
        DtQint8 => "qint8",
        DtQuint8 => "quint8",
        DtQint32 => "qint32",
        DtBfloat16 => "bfloat16",
        DtQint16 => "qint16",
        DtQuint16 => "quint16",
        DtUint16 => "uint16",
        DtComplex128 => "complex128",
        DtHalf => "float16",
        DtResource => "resource",
        DtVariant => "variant",
        DtUint32 => "uint32",
        DtUint64 => "uint64",
        DtFloat8E5m2 => "float8_e5m2",
        DtFloat8E4m3fn => "float8_e4m3fn",
        DtFloat8E4m3fnuz => "float8_e4m3fnuz",
        DtFloat8E4m3b11fnuz => "float8_e4m3b11fnuz",
        DtFloat8E5m2fnuz => "float8_e5m2fnuz",
        DtInt4 => "int4",
        DtUint4 => "uint4",
        DtInt2 => "int2",
        DtUint2 => "uint2",
        DtFloat4E2m1fn => "float4_e2m1fn",
        _ => return None,
    })
}

/// TensorFlow's Python name of a dtype (`float32`, `string`, `bfloat16`, ...; reference types
/// get `_ref`); `dtype(N)` for a value we do not know.
pub fn tf_name(dtype: i32) -> String {
    let (base, suffix) = if dtype > 100 {
        (dtype - 100, "_ref")
    } else {
        (dtype, "")
    };
    match base_name(base) {
        Some(n) => format!("{n}{suffix}"),
        None => format!("dtype({dtype})"),
    }
}

/// The `DataType` enum name (`DT_FLOAT`, `DT_FLOAT_REF`), as `saved_model_cli` shows
/// dtypes; `DT_<number>` for a value our schema lacks.
pub fn enum_name(dtype: i32) -> String {
    DataType::try_from(dtype)
        .map(|d| d.as_str_name().to_string())
        .unwrap_or_else(|_| format!("DT_{dtype}"))
}

/// The Python name of a dtype as `tf.<name>` shows it in a function signature: the
/// [`tf_name`] of its base type (a reference type as its base: `float32` for `DT_FLOAT_REF`);
/// for values without one, the lower-case [`enum_name`] without `DT_` and `_REF`
/// (`invalid`, `77`).
pub fn python_name(dtype: i32) -> String {
    let is_ref = dtype > 100 && DataType::try_from(dtype).is_ok();
    let base = if is_ref { dtype - 100 } else { dtype };
    if let Some(name) = base_name(base) {
        return name.to_string();
    }
    let name = enum_name(base);
    let name = name.strip_prefix("DT_").unwrap_or(&name);
    let name = name.strip_suffix("_REF").unwrap_or(name);
    name.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sizes() {
        assert_eq!(tf_name(DataType::DtFloat as i32), "float32");
        assert_eq!(tf_name(DataType::DtHalf as i32), "float16");
        assert_eq!(tf_name(DataType::DtFloatRef as i32), "float32_ref");
        assert_eq!(tf_name(0), "dtype(0)");
        assert_eq!(tf_name(77), "dtype(77)");
        assert_eq!(storage(DataType::DtComplex128 as i32), Storage::Fixed(16));
        assert_eq!(storage(DataType::DtBfloat16 as i32), Storage::Fixed(2));
        assert_eq!(storage(DataType::DtString as i32), Storage::String);
        assert_eq!(storage(DataType::DtResource as i32), Storage::Opaque);
        assert_eq!(storage(-5), Storage::Opaque);
        assert_eq!(enum_name(DataType::DtFloatRef as i32), "DT_FLOAT_REF");
        assert_eq!(enum_name(77), "DT_77");
        assert_eq!(python_name(DataType::DtHalfRef as i32), "float16");
        assert_eq!(python_name(0), "invalid");
        assert_eq!(python_name(77), "77");
    }

    /// `python_name` gives what `show` computed from the enum names before it used this
    /// table (that computation, kept here as the reference).
    #[test]
    fn python_names_match_the_enum_names() {
        fn from_enum_name(dtype: i32) -> String {
            let name = enum_name(dtype);
            let base = name.strip_prefix("DT_").unwrap_or(&name);
            let base = base.strip_suffix("_REF").unwrap_or(base);
            match base {
                "FLOAT" => "float32".into(),
                "DOUBLE" => "float64".into(),
                "HALF" => "float16".into(),
                other => other.to_ascii_lowercase(),
            }
        }
        for dtype in -3..300 {
            assert_eq!(python_name(dtype), from_enum_name(dtype), "dtype {dtype}");
        }
    }
}
