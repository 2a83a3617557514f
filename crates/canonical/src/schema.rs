//! What the encoder needs to know about message types, compiled once from their descriptors:
//! per type, its fields in number order with how each is read and written, presence, oneofs,
//! map entries; message fields point at other types by [`TypeId`].

use std::collections::HashMap;

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};

/// A message type of a [`Schema`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TypeId(pub(crate) u32);

/// How a varint field's value is normalized by protobuf C++ when it parses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VarintKind {
    /// `int32` and enums: truncated to 32 bits, written sign-extended to 64.
    Int32,
    /// `uint32` and `sint32`: truncated to 32 bits.
    Uint32,
    /// The 64-bit kinds: as read.
    Int64,
    /// `bool`: 0 or 1.
    Bool,
}

impl VarintKind {
    /// The value C++ holds (and writes) after reading `v`.
    #[inline]
    pub(crate) fn normalize(self, v: u64) -> u64 {
        match self {
            VarintKind::Int32 => v as u32 as i32 as i64 as u64,
            VarintKind::Uint32 => u64::from(v as u32),
            VarintKind::Int64 => v,
            VarintKind::Bool => u64::from(v != 0),
        }
    }
}

/// How a field's values travel on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    Varint(VarintKind),
    Fixed32,
    Fixed64,
    /// `string` or `bytes`.
    Bytes,
    Message,
    /// Groups: never a known field here, kept as unknown fields.
    Group,
}

impl Class {
    fn of(fd: &FieldDescriptor) -> Class {
        match fd.kind() {
            Kind::Int32 | Kind::Enum(_) => Class::Varint(VarintKind::Int32),
            Kind::Uint32 | Kind::Sint32 => Class::Varint(VarintKind::Uint32),
            Kind::Int64 | Kind::Uint64 | Kind::Sint64 => Class::Varint(VarintKind::Int64),
            Kind::Bool => Class::Varint(VarintKind::Bool),
            Kind::Fixed32 | Kind::Sfixed32 | Kind::Float => Class::Fixed32,
            Kind::Fixed64 | Kind::Sfixed64 | Kind::Double => Class::Fixed64,
            Kind::String | Kind::Bytes => Class::Bytes,
            Kind::Message(_) if fd.is_group() => Class::Group,
            Kind::Message(_) => Class::Message,
        }
    }

    /// Whether a value of wire type `wire_type` is this field's (else C++ keeps it as an
    /// unknown field); `list`: a repeated field, whose numbers may also come packed.
    #[inline]
    pub(crate) fn takes(self, wire_type: u8, list: bool) -> bool {
        match self {
            Class::Varint(_) => wire_type == 0 || (list && wire_type == 2),
            Class::Fixed64 => wire_type == 1 || (list && wire_type == 2),
            Class::Fixed32 => wire_type == 5 || (list && wire_type == 2),
            Class::Bytes | Class::Message => wire_type == 2,
            Class::Group => false,
        }
    }
}

/// How map keys are ordered (C++'s `MapSorter`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KeyOrder {
    /// Strings, bytewise.
    Bytes,
    Bool,
    /// `int32`, `sfixed32`: by the signed 32-bit value.
    Signed32,
    /// `sint32`: zigzag-decoded.
    Zigzag32,
    /// `int64`, `sfixed64`: by the signed value.
    Signed64,
    /// `sint64`: zigzag-decoded.
    Zigzag64,
    /// The unsigned kinds, by value.
    Unsigned,
}

/// A map field's entry type.
#[derive(Debug)]
pub(crate) struct MapField {
    pub key: Class,
    pub key_order: KeyOrder,
    pub value: Class,
    /// The key is a `string` (protobuf C++ refuses one that is not UTF-8 when it parses).
    pub key_utf8: bool,
    /// The value is a `string`.
    pub value_utf8: bool,
}

/// A known field.
#[derive(Debug)]
pub(crate) struct Field {
    pub number: u32,
    pub class: Class,
    /// A `string` field (not `bytes`): protobuf C++ refuses a value that is not UTF-8 when it
    /// parses, in any occurrence (also one a later occurrence overrides).
    pub utf8: bool,
    pub list: bool,
    pub packed: bool,
    /// Whether a default value is written when set (proto3 `optional`, oneof members,
    /// proto2 fields).
    pub presence: bool,
    /// Index of its oneof among the type's (non-synthetic) oneofs.
    pub oneof: Option<u16>,
    /// The message type of a message field, or of a map field's values when they are messages.
    pub child: Option<TypeId>,
    pub map: Option<MapField>,
}

/// A message type's fields in number order.
#[derive(Debug)]
pub(crate) struct MessageType {
    pub name: String,
    pub fields: Vec<Field>,
    /// Field index + 1 by field number, for numbers below [`DENSE`] (0: none).
    dense: Vec<u16>,
    sparse: HashMap<u32, u32>,
    pub oneofs: usize,
}

/// Field numbers below this are looked up in a table.
const DENSE: u32 = 256;

impl MessageType {
    /// The index of the field numbered `number`, if the type has one.
    #[inline]
    pub(crate) fn index(&self, number: u32) -> Option<u32> {
        if number < DENSE {
            match self.dense.get(number as usize) {
                Some(&i) if i > 0 => Some(u32::from(i) - 1),
                _ => None,
            }
        } else {
            self.sparse.get(&number).copied()
        }
    }
}

/// Every message type reachable from a root type, compiled for the encoder. Build it once
/// per root and reuse it: compiling walks every descriptor.
#[derive(Debug)]
pub struct Schema {
    pub(crate) types: Vec<MessageType>,
    by_name: HashMap<String, TypeId>,
}

impl Schema {
    /// The schema of `root` and every type it reaches.
    pub fn new(root: &MessageDescriptor) -> Schema {
        let mut schema = Schema {
            types: Vec::new(),
            by_name: HashMap::new(),
        };
        schema.add(root);
        schema
    }

    /// The type named `full_name` (e.g. `tensorflow.GraphDef`), if reachable from the root.
    pub fn type_id(&self, full_name: &str) -> Option<TypeId> {
        self.by_name.get(full_name).copied()
    }

    /// The root type.
    pub fn root(&self) -> TypeId {
        TypeId(0)
    }

    /// The full name of `ty`.
    pub fn name(&self, ty: TypeId) -> &str {
        &self.types[ty.0 as usize].name
    }

    pub(crate) fn get(&self, ty: TypeId) -> &MessageType {
        &self.types[ty.0 as usize]
    }

    fn add(&mut self, desc: &MessageDescriptor) -> TypeId {
        if let Some(&id) = self.by_name.get(desc.full_name()) {
            return id;
        }
        let id = TypeId(self.types.len() as u32);
        self.by_name.insert(desc.full_name().to_string(), id);
        // A placeholder first, so that a type reaching itself finds its id.
        self.types.push(MessageType {
            name: desc.full_name().to_string(),
            fields: Vec::new(),
            dense: Vec::new(),
            sparse: HashMap::new(),
            oneofs: 0,
        });
        let oneof_names: Vec<String> = desc
            .oneofs()
            .filter(|o| !o.is_synthetic())
            .map(|o| o.full_name().to_string())
            .collect();
        let mut fields = Vec::new();
        for fd in desc.fields() {
            let oneof = fd
                .containing_oneof()
                .filter(|o| !o.is_synthetic())
                .and_then(|o| oneof_names.iter().position(|n| n == o.full_name()))
                .map(|i| i as u16);
            let (map, child) = if fd.is_map() {
                let entry = fd.kind().as_message().expect("a map entry").clone();
                let key = entry.map_entry_key_field();
                let value = entry.map_entry_value_field();
                let child = value.kind().as_message().map(|m| self.add(m));
                let key_order = match key.kind() {
                    Kind::String | Kind::Bytes => KeyOrder::Bytes,
                    Kind::Bool => KeyOrder::Bool,
                    Kind::Int32 | Kind::Sfixed32 => KeyOrder::Signed32,
                    Kind::Sint32 => KeyOrder::Zigzag32,
                    Kind::Int64 | Kind::Sfixed64 => KeyOrder::Signed64,
                    Kind::Sint64 => KeyOrder::Zigzag64,
                    _ => KeyOrder::Unsigned,
                };
                let map = MapField {
                    key: Class::of(&key),
                    key_order,
                    value: Class::of(&value),
                    key_utf8: key.kind() == Kind::String,
                    value_utf8: value.kind() == Kind::String,
                };
                (Some(map), child)
            } else {
                let child = match Class::of(&fd) {
                    Class::Message => fd.kind().as_message().map(|m| self.add(m)),
                    _ => None,
                };
                (None, child)
            };
            fields.push(Field {
                number: fd.number(),
                class: Class::of(&fd),
                utf8: fd.kind() == Kind::String,
                list: fd.is_list() || fd.is_map(),
                packed: fd.is_packed(),
                presence: fd.supports_presence(),
                oneof,
                child,
                map,
            });
        }
        fields.sort_by_key(|f| f.number);
        let top = fields
            .iter()
            .map(|f| f.number)
            .filter(|&n| n < DENSE)
            .max()
            .map_or(0, |n| n as usize + 1);
        let mut dense = vec![0u16; top];
        let mut sparse = HashMap::new();
        for (i, f) in fields.iter().enumerate() {
            if f.number < DENSE {
                dense[f.number as usize] = i as u16 + 1;
            } else {
                sparse.insert(f.number, i as u32);
            }
        }
        let ty = &mut self.types[id.0 as usize];
        ty.fields = fields;
        ty.dense = dense;
        ty.sparse = sparse;
        ty.oneofs = oneof_names.len();
        id
    }
}
