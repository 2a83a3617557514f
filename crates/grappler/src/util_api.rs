//! The util C API plugins call on the item they are given: nodes to preserve, fetch nodes, and
//! the function library (`TF_LookUpOpDef`), with TensorFlow's signatures and semantics
//! (`tensorflow/c/experimental/grappler/grappler.cc`): every function first sets the status to
//! OK; string lists report the sum of the strings' lengths without terminators; a list call
//! whose storage is too small fails with INVALID_ARGUMENT.
//!
//! Graph properties are in [`crate::util_properties`].

use std::borrow::Cow;
use std::ffi::{c_char, c_int, c_void};

use unbound_proto::tensorflow::{FunctionDefLibrary, GraphDef};

use crate::abi::TfBuffer;
use crate::buffer::{buffer_bytes, fill_buffer};
use crate::item::GrapplerItem;
use crate::status::{c_str_arg, code, StatusOut, TfStatus};
use unbound_graph::ops::OpLibrary;

/// What a plugin's `TF_GrapplerItem*` points to during one `optimize_func` call: the item and
/// the graph it was given, parsed (for shape inference) only if a util call needs it.
#[derive(Debug)]
pub struct ItemContext<'a> {
    /// The item.
    pub item: &'a GrapplerItem,
    graph: GraphSource<'a>,
}

/// The graph passed to the plugin: already parsed, or its serialization, parsed on first use.
#[derive(Debug)]
enum GraphSource<'a> {
    Parsed(&'a GraphDef),
    Serialized {
        bytes: &'a [u8],
        parsed: std::cell::OnceCell<Option<Box<GraphDef>>>,
    },
}

impl<'a> ItemContext<'a> {
    /// The context of a call on `graph`, which the host holds parsed.
    pub fn new(item: &'a GrapplerItem, graph: &'a GraphDef) -> Self {
        Self {
            item,
            graph: GraphSource::Parsed(graph),
        }
    }

    /// The context of a call on the serialized graph `bytes` (an `--isolate` worker, which
    /// would otherwise parse every graph although most plugins never ask for properties).
    pub fn serialized(item: &'a GrapplerItem, bytes: &'a [u8]) -> Self {
        Self {
            item,
            graph: GraphSource::Serialized {
                bytes,
                parsed: std::cell::OnceCell::new(),
            },
        }
    }

    /// The graph, or None when its serialization does not parse.
    pub fn graph(&self) -> Option<&GraphDef> {
        use prost::Message;
        match &self.graph {
            GraphSource::Parsed(graph) => Some(graph),
            GraphSource::Serialized { bytes, parsed } => parsed
                .get_or_init(|| GraphDef::decode(*bytes).ok().map(Box::new))
                .as_deref(),
        }
    }

    /// The pointer handed to the plugin.
    pub fn as_ptr(&self) -> *const c_void {
        (self as *const Self).cast()
    }
}

/// The item behind a `TF_GrapplerItem*`, or None for null.
///
/// # Safety
/// `item` is null or the pointer of an [`ItemContext`] that stays live for `'a`.
pub(crate) unsafe fn item_context<'a>(item: *const c_void) -> Option<&'a ItemContext<'a>> {
    // SAFETY: null or a live ItemContext (the pointer the host passed to optimize_func), per
    // this function's contract; it is only read.
    unsafe { item.cast::<ItemContext<'a>>().as_ref() }
}

/// Which of the item's string lists a call reads.
type ItemList = fn(&GrapplerItem) -> Cow<'_, [String]>;

/// The nodes to preserve (computed from the fetch, init and saver nodes).
fn preserved(item: &GrapplerItem) -> Cow<'_, [String]> {
    Cow::Owned(item.nodes_to_preserve())
}

/// The fetch list as is (entries may carry `:port`).
fn fetched(item: &GrapplerItem) -> Cow<'_, [String]> {
    Cow::Borrowed(&item.fetch)
}

/// `...ListSize`: count and total length of one of the item's lists.
///
/// # Safety
/// As [`TF_GetNodesToPreserveListSize`].
unsafe fn list_size(
    item: *const c_void,
    select: ItemList,
    num_values: *mut c_int,
    storage_size: *mut usize,
    status: *mut TfStatus,
) {
    // SAFETY: `status` is null or the caller's live status (contract).
    let mut status = unsafe { StatusOut::reset(status) };
    // SAFETY: `item` is null or the live item given to optimize_func (contract).
    let Some(ctx) = (unsafe { item_context(item) }) else {
        return status.set(code::INVALID_ARGUMENT, "TF_GrapplerItem is null");
    };
    let list = select(ctx.item);
    // SAFETY: the out-pointers are null or writable (contract); as_mut checks null.
    if let Some(n) = unsafe { num_values.as_mut() } {
        *n = c_int::try_from(list.len()).unwrap_or(c_int::MAX);
    }
    // SAFETY: as above.
    if let Some(s) = unsafe { storage_size.as_mut() } {
        *s = list.iter().map(String::len).sum();
    }
}

/// `...List`: copies up to `num_values` strings of one of the item's lists into `storage`,
/// pointing `values[i]` into it.
///
/// # Safety
/// As [`TF_GetNodesToPreserveList`].
#[allow(clippy::too_many_arguments)]
unsafe fn list_fill(
    item: *const c_void,
    select: ItemList,
    values: *mut *mut c_char,
    lengths: *mut usize,
    num_values: c_int,
    storage: *mut c_void,
    storage_size: usize,
    status: *mut TfStatus,
) {
    // SAFETY: `status` is null or the caller's live status (contract).
    let mut status = unsafe { StatusOut::reset(status) };
    // SAFETY: `item` is null or the live item given to optimize_func (contract).
    let Some(ctx) = (unsafe { item_context(item) }) else {
        return status.set(code::INVALID_ARGUMENT, "TF_GrapplerItem is null");
    };
    let list = select(ctx.item);
    let count = usize::try_from(num_values).unwrap_or(0).min(list.len());
    if count > 0 && (values.is_null() || lengths.is_null() || storage.is_null()) {
        status.set(
            code::INVALID_ARGUMENT,
            "values, lengths and storage must not be null",
        );
        return;
    }
    let mut offset = 0usize;
    for (i, s) in list.iter().take(count).enumerate() {
        // `offset` never exceeds `storage_size`: each copy below was checked to fit.
        if storage_size - offset < s.len() {
            status.set(
                code::INVALID_ARGUMENT,
                "Not enough storage to hold the requested list of nodes",
            );
            return;
        }
        // SAFETY: `storage` is non-null (checked) and holds `storage_size` writable bytes
        // (contract); `offset + s.len() <= storage_size` (checked above), so the copy stays
        // inside it and cannot overlap the item's own string. `values` and `lengths` are
        // non-null (checked) with `num_values` slots (contract), and `i < count <= num_values`.
        unsafe {
            let dst = storage.cast::<u8>().add(offset);
            std::ptr::copy_nonoverlapping(s.as_ptr(), dst, s.len());
            *values.add(i) = dst.cast();
            *lengths.add(i) = s.len();
        }
        offset += s.len();
    }
}

/// `TF_GetNodesToPreserveListSize`.
///
/// # Safety
/// `item` is the item pointer given to `optimize_func` (or null); `status` is null or a live
/// status; out-pointers are null or writable.
#[no_mangle]
pub unsafe extern "C" fn TF_GetNodesToPreserveListSize(
    item: *const c_void,
    num_values: *mut c_int,
    storage_size: *mut usize,
    status: *mut TfStatus,
) {
    // SAFETY: the caller's arguments, under the same contract.
    unsafe { list_size(item, preserved, num_values, storage_size, status) };
}

/// `TF_GetNodesToPreserveList`.
///
/// # Safety
/// As `TF_GetNodesToPreserveListSize`; `values`/`lengths` are null or hold `num_values`
/// writable slots and `storage` is null or holds `storage_size` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn TF_GetNodesToPreserveList(
    item: *const c_void,
    values: *mut *mut c_char,
    lengths: *mut usize,
    num_values: c_int,
    storage: *mut c_void,
    storage_size: usize,
    status: *mut TfStatus,
) {
    let (n, size) = (num_values, storage_size);
    // SAFETY: the caller's arguments, under the same contract.
    unsafe { list_fill(item, preserved, values, lengths, n, storage, size, status) };
}

/// `TF_GetFetchNodesListSize`: the item's fetch list as is (entries may carry `:port`).
///
/// # Safety
/// As `TF_GetNodesToPreserveListSize`.
#[no_mangle]
pub unsafe extern "C" fn TF_GetFetchNodesListSize(
    item: *const c_void,
    num_values: *mut c_int,
    storage_size: *mut usize,
    status: *mut TfStatus,
) {
    // SAFETY: the caller's arguments, under the same contract.
    unsafe { list_size(item, fetched, num_values, storage_size, status) };
}

/// `TF_GetFetchNodesList`.
///
/// # Safety
/// As `TF_GetNodesToPreserveList`.
#[no_mangle]
pub unsafe extern "C" fn TF_GetFetchNodesList(
    item: *const c_void,
    values: *mut *mut c_char,
    lengths: *mut usize,
    num_values: c_int,
    storage: *mut c_void,
    storage_size: usize,
    status: *mut TfStatus,
) {
    let (n, size) = (num_values, storage_size);
    // SAFETY: the caller's arguments, under the same contract.
    unsafe { list_fill(item, fetched, values, lengths, n, storage, size, status) };
}

/// What a `TF_FunctionLibraryDefinition*` points to.
#[derive(Debug)]
pub struct FunctionLibraryHandle {
    ops: OpLibrary,
}

/// Decodes only field 2 (`library`) of a serialized GraphDef, so building a function library
/// for a huge graph does not parse its nodes. Errors when the bytes are not a valid message.
fn library_of_graph(bytes: &[u8]) -> Result<FunctionDefLibrary, ()> {
    use prost::Message;
    use unbound_proto::fields::tensorflow::graph_def;
    use unbound_wire::codec::{read_field, WireType};
    let mut library = FunctionDefLibrary::default();
    let mut pos = 0;
    while pos < bytes.len() {
        let field = read_field(bytes, &mut pos).map_err(|_| ())?;
        if field.number == graph_def::LIBRARY && field.wire_type == WireType::Len {
            library
                .merge(&bytes[field.start..field.end])
                .map_err(|_| ())?;
        }
    }
    Ok(library)
}

/// `TF_NewFunctionLibraryDefinition`: the built-in ops plus the functions of the serialized
/// GraphDef in `graph_buf`. Null with INVALID_ARGUMENT when the bytes do not parse.
///
/// # Safety
/// `graph_buf` is null or a live buffer whose `data` holds `length` readable bytes; `status` is
/// null or a live status.
#[no_mangle]
pub unsafe extern "C" fn TF_NewFunctionLibraryDefinition(
    graph_buf: *const TfBuffer,
    status: *mut TfStatus,
) -> *mut FunctionLibraryHandle {
    // SAFETY: `status` is null or the caller's live status (contract).
    let mut status = unsafe { StatusOut::reset(status) };
    // SAFETY: null or a live buffer of `length` readable bytes (contract), only read during
    // this call (the library built from it owns copies).
    let bytes = unsafe { buffer_bytes(graph_buf) };
    match library_of_graph(bytes) {
        Ok(library) => Box::into_raw(Box::new(FunctionLibraryHandle {
            ops: OpLibrary::new(Some(&library), None),
        })),
        Err(()) => {
            status.set(
                code::INVALID_ARGUMENT,
                "Unparseable tensorflow.GraphDef proto",
            );
            std::ptr::null_mut()
        }
    }
}

/// `TF_DeleteFunctionLibraryDefinition`. Null is a no-op.
///
/// # Safety
/// `lib` is null or came from `TF_NewFunctionLibraryDefinition` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn TF_DeleteFunctionLibraryDefinition(lib: *mut FunctionLibraryHandle) {
    if !lib.is_null() {
        // SAFETY: non-null, so it is the Box TF_NewFunctionLibraryDefinition leaked; freed
        // once (contract).
        drop(unsafe { Box::from_raw(lib) });
    }
}

/// `TF_LookUpOpDef`: writes the serialized OpDef of `name` into the empty buffer `buf`, or
/// sets NOT_FOUND.
///
/// # Safety
/// `lib` is null or came from `TF_NewFunctionLibraryDefinition`; `name` is null or a
/// NUL-terminated string; `buf` is null or a live buffer; `status` is null or a live status.
#[no_mangle]
pub unsafe extern "C" fn TF_LookUpOpDef(
    lib: *mut FunctionLibraryHandle,
    name: *const c_char,
    buf: *mut TfBuffer,
    status: *mut TfStatus,
) {
    // SAFETY: `status` is null or the caller's live status (contract).
    let mut status = unsafe { StatusOut::reset(status) };
    // SAFETY: `lib` is null or a live handle from TF_NewFunctionLibraryDefinition (contract);
    // it is only read.
    let (Some(lib), false) = (unsafe { lib.as_ref() }, name.is_null()) else {
        status.set(
            code::INVALID_ARGUMENT,
            "library and op name must not be null",
        );
        return;
    };
    // SAFETY: `name` is non-null (checked) and NUL-terminated (contract).
    let name = unsafe { c_str_arg(name) };
    match lib.ops.lookup(&name) {
        Some(entry) => {
            // SAFETY: `buf` is null or a live buffer only this call touches (contract);
            // fill_buffer checks null.
            if let Err(e) = unsafe { fill_buffer(buf, &entry.to_bytes()) } {
                status.set(code::INVALID_ARGUMENT, &e.to_string());
            }
        }
        None => status.set(
            code::NOT_FOUND,
            &format!(
                "Op type not registered '{name}' in binary running on unbound. Make sure the \
                 Op and Kernel are registered in the binary running in this process."
            ),
        ),
    }
}

#[cfg(test)]
mod tests {
    use prost::Message;
    use unbound_proto::tensorflow::{FunctionDef, NodeDef, OpDef};

    use super::library_of_graph;
    use super::{FunctionDefLibrary, GraphDef};

    #[test]
    fn the_library_is_read_without_the_nodes_and_bad_bytes_are_refused() {
        let function = FunctionDef {
            signature: Some(OpDef {
                name: "f".into(),
                ..OpDef::default()
            }),
            ..FunctionDef::default()
        };
        let graph = GraphDef {
            node: vec![NodeDef {
                name: "n".into(),
                op: "NoOp".into(),
                ..NodeDef::default()
            }],
            library: Some(FunctionDefLibrary {
                function: vec![function.clone()],
                ..FunctionDefLibrary::default()
            }),
            ..GraphDef::default()
        };
        let bytes = graph.encode_to_vec();
        let library = library_of_graph(&bytes).unwrap();
        assert_eq!(library.function, vec![function]);
        assert_eq!(
            library_of_graph(&[]).unwrap(),
            FunctionDefLibrary::default()
        );
        assert!(library_of_graph(&bytes[..bytes.len() - 1]).is_err());
        assert!(library_of_graph(&[0xff; 7]).is_err());
    }
}
