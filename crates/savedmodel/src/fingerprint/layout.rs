//! What the encoder needs to know about a message type, worked out once per type: its fields
//! in number order with their wire classes, presence, oneofs and map entry types.

use std::cell::Cell;
use std::collections::HashMap;

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

use super::wire_values::{class_of, Class};

/// A known field.
pub(super) struct FieldInfo {
    pub number: u32,
    pub class: Class,
    pub list: bool,
    pub packed: bool,
    pub presence: bool,
    /// Whether it is a `string` (its values must be UTF-8 for protobuf C++ to parse them).
    pub string: bool,
    /// Index of its (non-synthetic) oneof, counted within the message.
    pub oneof: Option<usize>,
    /// The message type of a message field (of a map field: of its values, if messages).
    pub message: Option<MessageDescriptor>,
    /// The layout index of `message`, once resolved.
    pub child: Cell<Option<usize>>,
    /// For a map field: its key field and the wire class of its values.
    pub map: Option<MapInfo>,
}

/// A map field's entry type.
pub(super) struct MapInfo {
    pub key: FieldDescriptor,
    pub key_class: Class,
    pub value_class: Class,
    /// Whether the keys, and the values, are `string`s.
    pub key_string: bool,
    pub value_string: bool,
}

impl MapInfo {
    /// The entry type of map field `fd`.
    pub fn of(fd: &FieldDescriptor) -> Self {
        let entry = fd.kind().as_message().expect("map entry").clone();
        let key = entry.map_entry_key_field();
        let value = entry.map_entry_value_field();
        Self {
            key_class: class_of(&key),
            key_string: key.kind() == Kind::String,
            key,
            value_class: class_of(&value),
            value_string: value.kind() == Kind::String,
        }
    }
}

/// A message type's fields in number order.
pub(super) struct Layout {
    pub name: String,
    /// The message type itself (for an encoder on another thread to build its own layout).
    pub desc: MessageDescriptor,
    pub fields: Vec<FieldInfo>,
    /// Field index + 1 by field number, for small numbers (0: none).
    dense: Vec<u16>,
    sparse: HashMap<u32, usize>,
    pub oneofs: usize,
}

/// Field numbers below this are looked up in a table.
const DENSE: u32 = 256;

impl Layout {
    pub fn new(desc: &MessageDescriptor) -> Self {
        let oneof_names: Vec<String> = desc
            .oneofs()
            .filter(|o| !o.is_synthetic())
            .map(|o| o.full_name().to_string())
            .collect();
        let mut fields: Vec<FieldInfo> = desc
            .fields()
            .map(|fd| {
                let oneof = fd
                    .containing_oneof()
                    .filter(|o| !o.is_synthetic())
                    .and_then(|o| oneof_names.iter().position(|n| n == o.full_name()));
                let (map, message) = if fd.is_map() {
                    let entry = fd.kind().as_message().expect("map entry").clone();
                    let value = entry.map_entry_value_field();
                    (Some(MapInfo::of(&fd)), value.kind().as_message().cloned())
                } else {
                    (None, fd.kind().as_message().cloned())
                };
                FieldInfo {
                    number: fd.number(),
                    class: class_of(&fd),
                    list: fd.is_list(),
                    packed: fd.is_packed(),
                    presence: fd.supports_presence(),
                    string: fd.kind() == Kind::String,
                    oneof,
                    message,
                    child: Cell::new(None),
                    map,
                }
            })
            .collect();
        fields.sort_by_key(|f| f.number);
        let mut dense = vec![
            0u16;
            fields
                .iter()
                .map(|f| f.number)
                .filter(|&n| n < DENSE)
                .max()
                .map_or(0, |n| n as usize + 1)
        ];
        let mut sparse = HashMap::new();
        for (i, f) in fields.iter().enumerate() {
            if f.number < DENSE {
                dense[f.number as usize] = i as u16 + 1;
            } else {
                sparse.insert(f.number, i);
            }
        }
        Self {
            name: desc.full_name().to_string(),
            desc: desc.clone(),
            fields,
            dense,
            sparse,
            oneofs: oneof_names.len(),
        }
    }

    /// The index of the field numbered `number`, if known.
    pub fn index(&self, number: u32) -> Option<usize> {
        if number < DENSE {
            match self.dense.get(number as usize) {
                Some(&i) if i > 0 => Some(i as usize - 1),
                _ => None,
            }
        } else {
            self.sparse.get(&number).copied()
        }
    }
}
