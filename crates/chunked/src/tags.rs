//! Field tags: the `FieldIndex` paths that say where a chunk belongs inside its parent.
//!
//! Building them from a path of names, numbers, indices and keys (what TensorFlow's
//! `get_field_tag` / `AddFieldTag` do), decoding them into steps (`GetFieldTypes`), and the
//! order in which the Merger applies chunked fields.

use prost_reflect::{Kind, MessageDescriptor};
use unbound_proto::tensorflow::proto_splitter::{
    field_index::{map_key, Kind as TagKind, MapKey},
    ChunkedField, FieldIndex,
};

use crate::error::{ChunkedError, Result};
pub use crate::fault::TagFault;
use unbound_wire::scalar::{encode_scalar, Scalar};
use unbound_wire::WireValue;

/// One element of a path into a message, as splitters name the place of a chunk.
#[derive(Clone, Debug, PartialEq)]
pub enum PathElem {
    /// A field, by name.
    Name(String),
    /// A field, by number.
    Number(u32),
    /// An element of the repeated field before it.
    Index(u64),
    /// A key of the map field before it.
    Key(KeyValue),
}

impl From<&str> for PathElem {
    fn from(name: &str) -> Self {
        PathElem::Name(name.to_string())
    }
}

impl From<u64> for PathElem {
    fn from(index: u64) -> Self {
        PathElem::Index(index)
    }
}

/// A map key before it is typed by the map's key field.
#[derive(Clone, Debug, PartialEq)]
pub enum KeyValue {
    /// A string key.
    Str(String),
    /// A bool key.
    Bool(bool),
    /// A signed integer key.
    Signed(i64),
    /// An unsigned integer key.
    Unsigned(u64),
}

/// One decoded step of a field-tag path: a field number and what selects inside it.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The field number.
    pub field: u32,
    /// An index or map key that follows the field, if any.
    pub selector: Option<Selector>,
}

/// What follows a field in a tag path.
#[derive(Clone, Debug, PartialEq)]
pub enum Selector {
    /// `FieldIndex.index`.
    Index(u64),
    /// `FieldIndex.map_key`.
    Key(KeyValue),
}

/// Builds the field tags for `path` relative to a message of type `desc`.
///
/// As in TensorFlow: a map field followed by another element takes it as its key (typed by
/// the map's key field); a repeated field followed by another element takes it as an index; a
/// trailing repeated field gets no index. Unlike TensorFlow, 64-bit keys keep their full range
/// and sint/fixed keys are accepted.
pub fn field_tags(desc: &MessageDescriptor, path: &[PathElem]) -> Result<Vec<FieldIndex>> {
    let mut tags = Vec::with_capacity(path.len());
    let mut current = Some(desc.clone());
    let mut i = 0;
    while i < path.len() {
        let msg = current.take().ok_or_else(|| ChunkedError::Schema {
            message: desc.full_name().to_string(),
            fault: format!("path {path:?} continues past a scalar field"),
        })?;
        let fd = match &path[i] {
            PathElem::Name(n) => msg.get_field_by_name(n),
            PathElem::Number(n) => msg.get_field(*n),
            other => {
                return Err(ChunkedError::Schema {
                    message: msg.full_name().to_string(),
                    fault: format!("expected a field name or number in {path:?}, found {other:?}"),
                })
            }
        }
        .ok_or_else(|| ChunkedError::Schema {
            message: msg.full_name().to_string(),
            fault: format!("no field {:?}", path[i]),
        })?;
        tags.push(FieldIndex {
            kind: Some(TagKind::Field(fd.number())),
        });
        i += 1;
        current = match fd.kind() {
            Kind::Message(m) => Some(m),
            _ => None,
        };
        if i < path.len() && fd.is_map() {
            let entry = current.clone().expect("map fields have entry messages");
            let key_kind = entry.map_entry_key_field().kind();
            tags.push(FieldIndex {
                kind: Some(TagKind::MapKey(map_key_tag(&key_kind, &path[i], &entry)?)),
            });
            current = match entry.map_entry_value_field().kind() {
                Kind::Message(m) => Some(m),
                _ => None,
            };
            i += 1;
        } else if i < path.len() && fd.is_list() {
            let index = match &path[i] {
                PathElem::Index(n) => *n,
                PathElem::Number(n) => u64::from(*n),
                other => {
                    return Err(ChunkedError::Schema {
                        message: msg.full_name().to_string(),
                        fault: format!(
                            "repeated field {} needs an index, found {other:?}",
                            fd.name()
                        ),
                    })
                }
            };
            tags.push(FieldIndex {
                kind: Some(TagKind::Index(index)),
            });
            i += 1;
        }
    }
    Ok(tags)
}

fn map_key_tag(key_kind: &Kind, elem: &PathElem, entry: &MessageDescriptor) -> Result<MapKey> {
    use map_key::Type;
    let key = match elem {
        PathElem::Key(k) => k.clone(),
        PathElem::Name(s) => KeyValue::Str(s.clone()),
        PathElem::Index(n) => KeyValue::Unsigned(*n),
        PathElem::Number(n) => KeyValue::Unsigned(u64::from(*n)),
    };
    let bad = || ChunkedError::Schema {
        message: entry.full_name().to_string(),
        fault: format!("map key {key:?} does not fit key type {key_kind:?}"),
    };
    let t = match (key_kind, &key) {
        (Kind::String, KeyValue::Str(s)) => Type::S(s.clone()),
        (Kind::Bool, KeyValue::Bool(b)) => Type::Boolean(*b),
        (Kind::Int32 | Kind::Sint32 | Kind::Sfixed32, k) => {
            Type::I32(i32::try_from(int_of(k).ok_or_else(bad)?).map_err(|_| bad())?)
        }
        (Kind::Int64 | Kind::Sint64 | Kind::Sfixed64, k) => {
            Type::I64(i64::try_from(int_of(k).ok_or_else(bad)?).map_err(|_| bad())?)
        }
        (Kind::Uint32 | Kind::Fixed32, k) => {
            Type::Ui32(u32::try_from(int_of(k).ok_or_else(bad)?).map_err(|_| bad())?)
        }
        (Kind::Uint64 | Kind::Fixed64, k) => {
            Type::Ui64(u64::try_from(int_of(k).ok_or_else(bad)?).map_err(|_| bad())?)
        }
        _ => return Err(bad()),
    };
    Ok(MapKey { r#type: Some(t) })
}

fn int_of(k: &KeyValue) -> Option<i128> {
    match k {
        KeyValue::Signed(v) => Some(i128::from(*v)),
        KeyValue::Unsigned(v) => Some(i128::from(*v)),
        KeyValue::Bool(b) => Some(i128::from(*b)),
        KeyValue::Str(s) => s.trim().parse().ok(),
    }
}

/// `GetFieldTypes`: groups a tag list into steps. An index or key must follow a field.
pub fn steps(tags: &[FieldIndex]) -> std::result::Result<Vec<Step>, TagFault> {
    let mut out: Vec<Step> = Vec::with_capacity(tags.len());
    let mut i = 0;
    while i < tags.len() {
        let field = match &tags[i].kind {
            Some(TagKind::Field(f)) => *f,
            Some(TagKind::Index(_)) => return Err(TagFault::IndexWithoutField(i)),
            Some(TagKind::MapKey(_)) => return Err(TagFault::KeyWithoutField(i)),
            None => return Err(TagFault::NoKind(i)),
        };
        i += 1;
        let selector = match tags.get(i).and_then(|t| t.kind.as_ref()) {
            Some(TagKind::Index(n)) => Some(Selector::Index(*n)),
            Some(TagKind::MapKey(k)) => Some(Selector::Key(
                key_value(k).ok_or(TagFault::KeyWithoutType(i))?,
            )),
            _ => None,
        };
        if selector.is_some() {
            i += 1;
        }
        out.push(Step { field, selector });
    }
    Ok(out)
}

fn key_value(k: &MapKey) -> Option<KeyValue> {
    use map_key::Type;
    Some(match k.r#type.as_ref()? {
        Type::S(s) => KeyValue::Str(s.clone()),
        Type::Boolean(b) => KeyValue::Bool(*b),
        Type::Ui32(v) => KeyValue::Unsigned(u64::from(*v)),
        Type::Ui64(v) => KeyValue::Unsigned(*v),
        Type::I32(v) => KeyValue::Signed(i64::from(*v)),
        Type::I64(v) => KeyValue::Signed(*v),
    })
}

/// Encodes a key as the map's key field would carry it (for matching entries).
pub fn encode_key(key_kind: &Kind, key: &KeyValue) -> Option<WireValue> {
    let scalar = match (key_kind, key) {
        (Kind::String, KeyValue::Str(s)) => Scalar::Bytes(s.as_bytes().to_vec()),
        (Kind::String, KeyValue::Signed(v)) => Scalar::Bytes(v.to_string().into_bytes()),
        (Kind::String, KeyValue::Unsigned(v)) => Scalar::Bytes(v.to_string().into_bytes()),
        (Kind::String, KeyValue::Bool(b)) => Scalar::Bytes(b.to_string().into_bytes()),
        (Kind::Bool, KeyValue::Str(s)) => match s.as_str() {
            "true" => Scalar::Bool(true),
            "false" => Scalar::Bool(false),
            _ => return None,
        },
        (_, KeyValue::Str(s)) => Scalar::Signed(s.trim().parse().ok()?),
        (_, KeyValue::Bool(b)) => Scalar::Bool(*b),
        (_, KeyValue::Signed(v)) => Scalar::Signed(*v),
        (_, KeyValue::Unsigned(v)) => Scalar::Unsigned(*v),
    };
    encode_scalar(key_kind, &scalar)
}

/// One item of the merge-order key of a chunked field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum OrderItem {
    Field(u32),
    Index(u64),
    /// A map key: TensorFlow's comparator stops at the first pair of map keys and calls the two
    /// fields equivalent.
    KeyStop,
}

/// The merge-order key of a chunked field. Comparing keys gives TensorFlow's order: by field
/// numbers and indices along the common prefix, shorter paths first, equal paths by chunk
/// index; a map key at the same depth in both makes them equivalent (the stable sort then keeps
/// their metadata order).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MergeOrder {
    items: Vec<OrderItem>,
    chunk_index: Option<u64>,
}

impl MergeOrder {
    /// The key of `cf`.
    pub fn of(cf: &ChunkedField) -> Self {
        let mut items = Vec::with_capacity(cf.field_tag.len());
        let mut stopped = false;
        for tag in &cf.field_tag {
            match &tag.kind {
                Some(TagKind::Field(f)) => items.push(OrderItem::Field(*f)),
                Some(TagKind::Index(n)) => items.push(OrderItem::Index(*n)),
                Some(TagKind::MapKey(_)) | None => {
                    items.push(OrderItem::KeyStop);
                    stopped = true;
                    break;
                }
            }
        }
        let chunk_index =
            (!stopped).then(|| cf.message.as_ref().and_then(|m| m.chunk_index).unwrap_or(0));
        Self { items, chunk_index }
    }

    /// Whether two keys have different kinds of tag at the same depth before any difference,
    /// which TensorFlow rejects as "Field tag mismatch".
    pub fn mismatched(&self, other: &Self) -> bool {
        for (a, b) in self.items.iter().zip(&other.items) {
            match (a, b) {
                (OrderItem::Field(x), OrderItem::Field(y)) if x == y => continue,
                (OrderItem::Index(x), OrderItem::Index(y)) if x == y => continue,
                (OrderItem::Field(_), OrderItem::Field(_))
                | (OrderItem::Index(_), OrderItem::Index(_))
                | (OrderItem::KeyStop, OrderItem::KeyStop) => return false,
                _ => return true,
            }
        }
        false
    }
}

/// Sorts chunked fields into merge order (stable). Fails on a tag-kind mismatch between
/// neighbours, as TensorFlow's comparator does.
pub fn sort_for_merge(
    fields: &[ChunkedField],
) -> std::result::Result<Vec<&ChunkedField>, TagFault> {
    let mut keyed: Vec<(MergeOrder, &ChunkedField)> =
        fields.iter().map(|cf| (MergeOrder::of(cf), cf)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    for pair in keyed.windows(2) {
        if pair[0].0.mismatched(&pair[1].0) {
            return Err(TagFault::KindMismatch);
        }
    }
    Ok(keyed.into_iter().map(|(_, cf)| cf).collect())
}
