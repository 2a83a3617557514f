//! OpDefs: what `TF_LookUpOpDef` answers and what graph conversion and shape inference use to
//! know an op's inputs, outputs and attrs.
//!
//! Sources, in TensorFlow's order of precedence (`FunctionLibraryDefinition::LookUp`):
//! 1. the functions of the graph's library (a function is an op whose OpDef is its signature);
//! 2. the built-in table: every OpDef registered in TensorFlow 2.21's global op registry,
//!    embedded as the bytes TensorFlow serialized (`scripts/gen_op_defs.py` regenerates it), so
//!    a lookup returns exactly what TensorFlow's `TF_LookUpOpDef` returns;
//! 3. the model's `stripped_op_list`, for custom ops the built-in table does not know.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use prost::Message;
use unbound_proto::fields::tensorflow::op_list;
use unbound_proto::tensorflow::{FunctionDef, FunctionDefLibrary, OpDef, OpList};
use unbound_wire::codec::{read_field, WireType};

/// The embedded `tensorflow.OpList` of TensorFlow 2.21's registry, sorted by op name.
const BUILTIN_OP_LIST: &[u8] = include_bytes!("../data/ops-tf-2.21.0.binpb");

/// One OpDef with the exact bytes it was serialized as (when it came from serialized data).
#[derive(Debug, Clone)]
pub struct OpEntry {
    /// The decoded OpDef.
    pub op_def: Arc<OpDef>,
    /// The bytes as serialized by its source; `None` when built here (function signatures).
    pub raw: Option<&'static [u8]>,
}

impl OpEntry {
    /// The serialized OpDef: the source's bytes when known, else prost's encoding.
    pub fn to_bytes(&self) -> Vec<u8> {
        match self.raw {
            Some(raw) => raw.to_vec(),
            None => self.op_def.encode_to_vec(),
        }
    }
}

/// The built-in table, decoded once: op name -> entry.
pub fn builtin_ops() -> &'static HashMap<String, OpEntry> {
    static TABLE: OnceLock<HashMap<String, OpEntry>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = HashMap::new();
        for raw in op_list_entries(BUILTIN_OP_LIST) {
            // The table is generated from TensorFlow and checked by the tests; an entry that
            // does not decode would be a build defect, and is skipped rather than trusted.
            if let Ok(op_def) = OpDef::decode(raw) {
                let name = op_def.name.clone();
                table.insert(
                    name,
                    OpEntry {
                        op_def: Arc::new(op_def),
                        raw: Some(raw),
                    },
                );
            }
        }
        table
    })
}

/// The byte slices of every occurrence of `OpList.op` (length-delimited) in `data`: the `op`
/// entries of a serialized `OpList`, kept as the bytes TensorFlow wrote.
fn op_list_entries(data: &'static [u8]) -> Vec<&'static [u8]> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let Ok(field) = read_field(data, &mut pos) else {
            break;
        };
        if field.number == op_list::OP && field.wire_type == WireType::Len {
            out.push(&data[field.start..field.end]);
        }
    }
    out
}

/// A library function: decoded, or its serialization, decoded on first use (a library of
/// thousands of functions is mostly looked up by signature; bodies are read only for shape
/// inference through calls).
#[derive(Debug, Clone)]
struct LibraryFunction {
    bytes: Option<Bytes>,
    decoded: OnceLock<Option<Arc<FunctionDef>>>,
}

impl LibraryFunction {
    fn get(&self) -> Option<&FunctionDef> {
        self.decoded
            .get_or_init(|| {
                let bytes = self.bytes.as_ref()?;
                unbound_wire::decode_lenient::<FunctionDef>(
                    bytes.clone(),
                    unbound_proto::descriptor_pool(),
                )
                .ok()
                .map(Arc::new)
            })
            .as_deref()
    }
}

/// The ops a graph can use: its library's functions, the built-in table, and its model's
/// stripped op list, looked up in that order.
#[derive(Debug, Default, Clone)]
pub struct OpLibrary {
    functions: HashMap<String, LibraryFunction>,
    function_ops: HashMap<String, OpEntry>,
    stripped: HashMap<String, OpEntry>,
}

impl OpLibrary {
    /// Only the built-in table.
    pub fn builtin() -> Self {
        Self::default()
    }

    /// The built-in table plus `library`'s functions and `stripped`'s ops.
    pub fn new(library: Option<&FunctionDefLibrary>, stripped: Option<&OpList>) -> Self {
        let mut lib = Self::default();
        if let Some(library) = library {
            for function in &library.function {
                lib.add_function(function.clone());
            }
        }
        if let Some(stripped) = stripped {
            for op in &stripped.op {
                lib.stripped.insert(
                    op.name.clone(),
                    OpEntry {
                        op_def: Arc::new(op.clone()),
                        raw: None,
                    },
                );
            }
        }
        lib
    }

    /// Adds (or replaces) a function; its signature becomes an op.
    pub fn add_function(&mut self, function: FunctionDef) {
        let Some(signature) = function.signature.clone() else {
            return;
        };
        let name = signature.name.clone();
        self.function_ops.insert(
            name.clone(),
            OpEntry {
                op_def: Arc::new(signature),
                raw: None,
            },
        );
        let decoded = OnceLock::from(Some(Arc::new(function)));
        self.functions.insert(
            name,
            LibraryFunction {
                bytes: None,
                decoded,
            },
        );
    }

    /// The built-in table plus serialized library functions, each given as its signature and
    /// its serialized `FunctionDef` (decoded only if [`OpLibrary::function`] asks for it, so
    /// a body that does not decode reads as no function), plus `stripped`'s ops. Later
    /// functions of one name replace earlier ones, as in [`OpLibrary::new`].
    pub fn from_serialized(
        functions: impl IntoIterator<Item = (Arc<OpDef>, Bytes)>,
        stripped: Option<&OpList>,
    ) -> Self {
        let mut lib = Self::new(None, stripped);
        for (signature, bytes) in functions {
            let name = signature.name.clone();
            lib.function_ops.insert(
                name.clone(),
                OpEntry {
                    op_def: signature,
                    raw: None,
                },
            );
            lib.functions.insert(
                name,
                LibraryFunction {
                    bytes: Some(bytes),
                    decoded: OnceLock::new(),
                },
            );
        }
        lib
    }

    /// The OpDef named `name`, from the first source that has it.
    pub fn lookup(&self, name: &str) -> Option<&OpEntry> {
        self.function_ops
            .get(name)
            .or_else(|| builtin_ops().get(name))
            .or_else(|| self.stripped.get(name))
    }

    /// Shorthand for the decoded OpDef of `name`.
    pub fn op_def(&self, name: &str) -> Option<&OpDef> {
        self.lookup(name).map(|e| e.op_def.as_ref())
    }

    /// The library function named `name`, if `name` is a function.
    pub fn function(&self, name: &str) -> Option<&FunctionDef> {
        self.functions.get(name).and_then(LibraryFunction::get)
    }

    /// The library's functions and the stripped ops, as protos (to rebuild this library in
    /// another process).
    pub fn sources(&self) -> (FunctionDefLibrary, OpList) {
        let mut functions: Vec<FunctionDef> = self
            .functions
            .values()
            .filter_map(|f| f.get().cloned())
            .collect();
        functions.sort_by(|a, b| {
            let name = |f: &FunctionDef| f.signature.as_ref().map(|s| s.name.clone());
            name(a).cmp(&name(b))
        });
        let mut op: Vec<OpDef> = self
            .stripped
            .values()
            .map(|e| e.op_def.as_ref().clone())
            .collect();
        op.sort_by(|a, b| a.name.cmp(&b.name));
        (
            FunctionDefLibrary {
                function: functions,
                ..Default::default()
            },
            OpList { op },
        )
    }

    /// Names of the library's functions.
    pub fn function_names(&self) -> impl Iterator<Item = &str> {
        self.functions.keys().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_table_has_the_standard_ops() {
        let table = builtin_ops();
        assert!(table.len() > 1500, "only {} ops", table.len());
        let add = &table["Add"];
        assert_eq!(add.op_def.input_arg.len(), 2);
        assert_eq!(add.op_def.output_arg[0].name, "z");
        // The raw bytes decode to the same OpDef.
        assert_eq!(OpDef::decode(add.raw.unwrap()).unwrap(), *add.op_def);
        for name in [
            "Const",
            "Identity",
            "AddN",
            "MatMul",
            "Conv2D",
            "StatefulPartitionedCall",
        ] {
            assert!(table.contains_key(name), "{name} missing");
        }
    }

    #[test]
    fn functions_take_precedence_and_stripped_ops_fill_gaps() {
        let signature = OpDef {
            name: "Add".into(),
            ..Default::default()
        };
        let library = FunctionDefLibrary {
            function: vec![FunctionDef {
                signature: Some(signature),
                ..Default::default()
            }],
            ..Default::default()
        };
        let stripped = OpList {
            op: vec![OpDef {
                name: "MyCustomOp".into(),
                ..Default::default()
            }],
        };
        let lib = OpLibrary::new(Some(&library), Some(&stripped));
        assert!(lib.op_def("Add").unwrap().input_arg.is_empty());
        assert!(lib.lookup("Add").unwrap().raw.is_none());
        assert!(lib.op_def("MyCustomOp").is_some());
        assert!(lib.op_def("Sub").is_some());
        assert!(lib.op_def("NoSuchOp").is_none());
        assert!(lib.function("Add").is_some());
    }
}
