//! [`LibraryIndex`]: a serialized function library, indexed without decoding its bodies.
//!
//! A graph of thousands of functions is optimized one function at a time; decoding the whole
//! library for each (or even once, and holding it) costs more than the functions themselves.
//! The index keeps each function's serialization (slices of the library's bytes), its
//! signature and its `api_implements` attr; a function body is decoded only when a walk
//! reaches it. [`LibraryIndex::plugin_library`] gives what [`super::plugin_library`] gives for
//! the decoded library, in time proportional to the functions reached, not to the library.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use bytes::Bytes;
use unbound_proto::fields::tensorflow::{function_def, function_def_library};
use unbound_proto::tensorflow::{FunctionDef, FunctionDefLibrary, GradientDef, NodeDef, OpDef};
use unbound_wire::codec::{read_field, WireType};

use super::library::{node_callees, stub_library, API_IMPLEMENTS};
use crate::ops::OpLibrary;

/// Why a serialized library cannot be indexed or a function in it decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the function library does not decode: {0}")]
pub struct LibraryError(String);

/// One function of the library.
#[derive(Debug, Clone)]
struct Entry {
    signature: Arc<OpDef>,
    bytes: Bytes,
    api: Option<Vec<u8>>,
}

/// A serialized `FunctionDefLibrary`, indexed: see the module docs.
#[derive(Debug, Clone, Default)]
pub struct LibraryIndex {
    entries: Vec<Entry>,
    /// Name -> index of its last definition (what a lookup by name finds).
    by_name: HashMap<String, usize>,
    gradients: Vec<GradientDef>,
}

impl LibraryIndex {
    /// Indexes the serialized `FunctionDefLibrary` `library`: every function's signature and
    /// `api_implements` attr are decoded, its body is not. Errors when the bytes are not a
    /// library.
    pub fn new(library: &Bytes) -> Result<Self, LibraryError> {
        let mut index = Self::default();
        let mut pos = 0;
        while pos < library.len() {
            let field = read_field(library, &mut pos).map_err(|e| LibraryError(e.to_string()))?;
            if field.wire_type != WireType::Len {
                continue;
            }
            let value = library.slice(field.start..field.end);
            match field.number {
                function_def_library::FUNCTION => {
                    let entry = index_function(value)?;
                    let at = index.entries.len();
                    index.by_name.insert(entry.signature.name.clone(), at);
                    index.entries.push(entry);
                }
                function_def_library::GRADIENT => index.gradients.push(
                    unbound_wire::decode_lenient::<GradientDef>(
                        value,
                        unbound_proto::descriptor_pool(),
                    )
                    .map_err(|e| LibraryError(e.to_string()))?,
                ),
                _ => {}
            }
        }
        Ok(index)
    }

    /// How many functions the library has (counting repeated names).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the library has no function.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The serialized `FunctionDef` at `index` (library order).
    pub fn function_bytes(&self, index: usize) -> Option<&Bytes> {
        self.entries.get(index).map(|e| &e.bytes)
    }

    /// The function at `index`, decoded.
    pub fn decode(&self, index: usize) -> Result<FunctionDef, LibraryError> {
        let entry = self
            .entries
            .get(index)
            .ok_or_else(|| LibraryError(format!("no function {index}")))?;
        unbound_wire::decode_lenient::<FunctionDef>(
            entry.bytes.clone(),
            unbound_proto::descriptor_pool(),
        )
        .map_err(|e| LibraryError(format!("function {}: {e}", entry.signature.name)))
    }

    /// The ops of a graph with this library: the built-in table, these functions (bodies
    /// decoded on use) and `stripped`'s ops; equal to [`OpLibrary::new`] of the decoded
    /// library.
    pub fn op_library(&self, stripped: Option<&unbound_proto::tensorflow::OpList>) -> OpLibrary {
        OpLibrary::from_serialized(
            self.entries
                .iter()
                .map(|e| (Arc::clone(&e.signature), e.bytes.clone())),
            stripped,
        )
    }

    /// [`super::plugin_library`]`(library, function)` for this library: the stubs of the
    /// functions `function`'s body reaches, transitively, and their gradients.
    pub fn plugin_library(
        &self,
        function: &FunctionDef,
    ) -> Result<FunctionDefLibrary, LibraryError> {
        let mut walk = Walk {
            index: self,
            reached: BTreeSet::new(),
            queue: Vec::new(),
            apis: BTreeSet::new(),
        };
        let gradients: HashMap<&str, &str> = self
            .gradients
            .iter()
            .map(|g| (g.function_name.as_str(), g.gradient_func.as_str()))
            .collect();
        walk.visit_all(&function.node_def);
        while let Some(at) = walk.queue.pop() {
            let entry = &self.entries[at];
            if let Some(api) = &entry.api {
                walk.reach_api(api);
            }
            let body = self.decode(at)?;
            walk.visit_all(&body.node_def);
            if let Some(gradient) = gradients.get(entry.signature.name.as_str()) {
                walk.reach(gradient);
            }
        }
        let reached: BTreeSet<&str> = walk
            .reached
            .iter()
            .map(|&at| self.entries[at].signature.name.as_str())
            .collect();
        // In library order, the first definition of each reached name.
        let mut kept = BTreeSet::new();
        let mut function = Vec::new();
        for (at, entry) in self.entries.iter().enumerate() {
            let name = entry.signature.name.as_str();
            if reached.contains(name) && kept.insert(name) {
                function.push(self.decode(at)?);
            }
        }
        let gradient = self
            .gradients
            .iter()
            .filter(|g| reached.contains(g.function_name.as_str()))
            .cloned()
            .collect();
        Ok(stub_library(&FunctionDefLibrary {
            function,
            gradient,
            registered_gradients: Vec::new(),
        }))
    }
}

/// The signature and `api_implements` of one serialized `FunctionDef`.
fn index_function(bytes: Bytes) -> Result<Entry, LibraryError> {
    let bad = |e: &dyn std::fmt::Display| LibraryError(e.to_string());
    // Every occurrence of `signature`, merged as protobuf merges them: concatenated, then
    // decoded as protobuf C++ parses (`decode_lenient`).
    let mut signature_bytes = Vec::new();
    let mut api = None;
    let mut pos = 0;
    while pos < bytes.len() {
        let field = read_field(&bytes, &mut pos).map_err(|e| bad(&e))?;
        if field.wire_type != WireType::Len {
            continue;
        }
        let value = &bytes[field.start..field.end];
        match field.number {
            function_def::SIGNATURE => signature_bytes.extend_from_slice(value),
            function_def::ATTR => {
                if let Some(found) = api_entry(value)? {
                    api = found;
                }
            }
            _ => {}
        }
    }
    let signature: OpDef =
        unbound_wire::decode_lenient(signature_bytes, unbound_proto::descriptor_pool())
            .map_err(|e| bad(&e))?;
    Ok(Entry {
        signature: Arc::new(signature),
        bytes,
        api,
    })
}

/// For one serialized `FunctionDef.attr` map entry: `Some(value)` when its key is
/// `api_implements` (the value's `s`, or None when it is not a string), None for other keys.
fn api_entry(entry: &[u8]) -> Result<Option<Option<Vec<u8>>>, LibraryError> {
    use unbound_proto::tensorflow::attr_value::Value;
    use unbound_proto::tensorflow::AttrValue;
    let mut key = String::new();
    let mut value = None;
    let mut pos = 0;
    while pos < entry.len() {
        let field = read_field(entry, &mut pos).map_err(|e| LibraryError(e.to_string()))?;
        let bytes = &entry[field.start..field.end];
        match (field.number, field.wire_type) {
            (function_def::attr_entry::KEY, WireType::Len) => {
                key = String::from_utf8_lossy(bytes).into_owned();
            }
            (function_def::attr_entry::VALUE, WireType::Len) => value = Some(bytes),
            _ => {}
        }
    }
    if key != API_IMPLEMENTS {
        return Ok(None);
    }
    let decoded = match value {
        Some(bytes) => unbound_wire::decode_lenient::<AttrValue>(
            bytes.to_vec(),
            unbound_proto::descriptor_pool(),
        )
        .map_err(|e| LibraryError(e.to_string()))?,
        None => AttrValue::default(),
    };
    Ok(Some(match decoded.value {
        Some(Value::S(s)) => Some(s.to_vec()),
        _ => None,
    }))
}

/// The state of [`LibraryIndex::plugin_library`]'s walk, over entry indices.
struct Walk<'a> {
    index: &'a LibraryIndex,
    reached: BTreeSet<usize>,
    queue: Vec<usize>,
    apis: BTreeSet<&'a [u8]>,
}

impl<'a> Walk<'a> {
    /// Marks the function `name` reached (and queues it) if it is one and was not yet.
    fn reach(&mut self, name: &str) {
        if let Some(&at) = self.index.by_name.get(name) {
            if self.reached.insert(at) {
                self.queue.push(at);
            }
        }
    }

    /// Reaches what `nodes` call: their ops and the functions in their attrs.
    fn visit_all(&mut self, nodes: &[NodeDef]) {
        for name in nodes.iter().flat_map(node_callees) {
            self.reach(name);
        }
    }

    /// Reaches every function implementing `api`.
    fn reach_api(&mut self, api: &'a [u8]) {
        if !self.apis.insert(api) {
            return;
        }
        let index = self.index;
        for entry in &index.entries {
            if entry.api.as_deref() == Some(api) {
                self.reach(&entry.signature.name);
            }
        }
    }
}
