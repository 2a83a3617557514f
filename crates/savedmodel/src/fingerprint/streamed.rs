//! The canonical form of a serialized model that is not in canonical form, by the encoder of
//! `unbound_canonical`: its bytes are read where they lie, with no message built (issue 29: the
//! general path, which lists every field of every message, made a non-canonical model ten
//! times slower to fingerprint than a canonical one). The fingerprint is then that of the
//! canonical form, hashed as a canonical model is.

use std::sync::OnceLock;

use std::collections::HashMap;
use std::sync::Mutex;

use prost_reflect::MessageDescriptor;
use unbound_canonical::{CanonicalError, Schema};
use unbound_wire::codec::read_field;

use super::canonical::Source;
use super::farmhash;
use super::{model_fault, Result};
use crate::dir::message_descriptor as descriptor;
use crate::SavedModelError;

/// The compiled schema of `tensorflow.SavedModel` (and every type it reaches), built once.
fn schema() -> Result<&'static Schema> {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    if let Some(schema) = SCHEMA.get() {
        return Ok(schema);
    }
    let desc = descriptor("tensorflow.SavedModel")?;
    Ok(SCHEMA.get_or_init(|| Schema::new(&desc)))
}

/// The error of a fault the encoder found, named as the general path names it.
fn encoding_error(error: CanonicalError) -> SavedModelError {
    match error {
        CanonicalError::Malformed { type_name, error } => {
            SavedModelError::malformed(format!("{type_name} being fingerprinted"), error)
        }
        CanonicalError::TooDeep { type_name, limit } => SavedModelError::TooDeep {
            source_name: format!("{type_name} being fingerprinted"),
            limit,
        },
    }
}

/// The deterministic serialization of the `SavedModel` serialized in `bytes`, in memory (a
/// buffer of its size: a `.pb` is under 2 GiB), made in one pass on every core.
pub fn canonical_model(bytes: &[u8]) -> Result<Vec<u8>> {
    let schema = schema()?;
    unbound_canonical::encode_to_vec(schema, schema.root(), &[bytes]).map_err(encoding_error)
}

/// Inputs up to this size are encoded in memory, in one pass on every core; larger ones in two
/// streaming passes (memory: a few buffers).
const IN_MEMORY_UP_TO: usize = 1 << 30;

/// FarmHash `Fingerprint64` of the deterministic serialization of the message of type `desc`
/// made of `sources`: slices are read where they lie, a split's chunk taken as the pieces it
/// is written as when each is whole fields, and a built message written out first
/// (losslessly: as the bytes it was built from). `None` when a chunk's pieces cut a field (a
/// large value written as a piece of its own after its key): the byte encoder reads whole
/// fields only, so the caller takes the general encoder.
pub fn fingerprint64(sources: &[Source<'_>], desc: &MessageDescriptor) -> Result<Option<u64>> {
    for source in sources {
        if let Source::Written(_, pieces) = source {
            if !pieces.iter().all(|piece| whole_fields(piece)) {
                return Ok(None);
            }
        }
    }
    let schema = schema_of(desc)?;
    let mut written: Vec<Vec<u8>> = Vec::new();
    for source in sources {
        if let Source::Ref(m) = source {
            written.push(m.to_vec().map_err(|e| model_fault(e.to_string()))?);
        }
    }
    let mut written = written.iter();
    let mut parts: Vec<&[u8]> = Vec::with_capacity(sources.len());
    for source in sources {
        match source {
            Source::Slice(buf, start, end) => parts.push(&buf[*start..*end]),
            Source::Raw(buf) => parts.push(buf),
            Source::Ref(_) => parts.push(written.next().expect("written above")),
            Source::Written(_, pieces) => parts.extend(pieces.iter().map(|p| &p[..])),
        }
    }
    let input: usize = parts.iter().map(|p| p.len()).sum();
    let root = schema.root();
    if input <= IN_MEMORY_UP_TO {
        let bytes =
            unbound_canonical::encode_to_vec(&schema, root, &parts).map_err(encoding_error)?;
        return Ok(Some(farmhash::fingerprint64(&bytes)));
    }
    unbound_canonical::fingerprint64(&schema, root, &parts)
        .map(Some)
        .map_err(encoding_error)
}

/// Whether `piece` is a run of whole fields: its keys and lengths, read one after another,
/// end exactly at its end. (A piece that cuts a field ends inside it: the field's length, or
/// its varint, runs past the end.)
fn whole_fields(piece: &[u8]) -> bool {
    let mut pos = 0;
    while pos < piece.len() {
        if read_field(piece, &mut pos).is_err() {
            return false;
        }
    }
    true
}

/// The compiled schema of message type `desc`, built once per type.
fn schema_of(desc: &MessageDescriptor) -> Result<std::sync::Arc<Schema>> {
    static SCHEMAS: OnceLock<Mutex<HashMap<String, std::sync::Arc<Schema>>>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut schemas = schemas.lock().unwrap_or_else(|poison| poison.into_inner());
    Ok(schemas
        .entry(desc.full_name().to_string())
        .or_insert_with(|| std::sync::Arc::new(Schema::new(desc)))
        .clone())
}

#[cfg(test)]
mod tests {
    use super::whole_fields;

    #[test]
    fn pieces_that_cut_a_field_are_not_whole_fields() {
        // Field 1 (length-delimited, 3 bytes), then field 2 (varint 150).
        let fields = [0x0a, 0x03, b'a', b'b', b'c', 0x10, 0x96, 0x01];
        assert!(whole_fields(&fields));
        assert!(whole_fields(&fields[..5]) && whole_fields(&fields[5..]));
        // A key and length without the value (a large value written as a piece of its own).
        assert!(!whole_fields(&fields[..2]));
        // A varint cut in the middle.
        assert!(!whole_fields(&fields[..7]));
    }
}
