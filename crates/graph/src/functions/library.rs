//! The function library a function item's graph carries.
//!
//! TensorFlow gives a function item the functions reachable from the function's body
//! (`MakeGrapplerFunctionItem`: `flib.ReachableDefinitions(func)`), and the meta optimizer's
//! `RunOptimizer` swaps that library for a stub (`GetFunctionDefLibraryStub`) before calling an
//! optimizer whose `UsesFunctionLibrary()` is false, as plugin optimizers' is. Whatever library
//! such an optimizer returns is discarded: the real one is swapped back in afterwards.

use std::collections::{BTreeSet, HashMap};

use unbound_proto::tensorflow::attr_value::Value;
use unbound_proto::tensorflow::{FunctionDef, FunctionDefLibrary, GradientDef, NodeDef};

/// The attr naming the API a function implements; reaching one such function reaches all of
/// them (TensorFlow's `kApiImplements`).
pub(super) const API_IMPLEMENTS: &str = "api_implements";

/// The library a plugin sees in the graph of `function`'s item:
/// `stub_library(&reachable_library(library, &function.node_def))`.
pub fn plugin_library(library: &FunctionDefLibrary, function: &FunctionDef) -> FunctionDefLibrary {
    stub_library(&reachable_library(library, &function.node_def))
}

/// TensorFlow's `GetFunctionDefLibraryStub`: each function's signature, `attr`, `arg_attr` and
/// `resource_arg_unique_id` without its body, `ret` or `control_ret`; the gradients kept;
/// `registered_gradients` dropped.
pub fn stub_library(library: &FunctionDefLibrary) -> FunctionDefLibrary {
    FunctionDefLibrary {
        function: library
            .function
            .iter()
            .map(|f| FunctionDef {
                signature: f.signature.clone(),
                attr: f.attr.clone(),
                arg_attr: f.arg_attr.clone(),
                resource_arg_unique_id: f.resource_arg_unique_id.clone(),
                ..FunctionDef::default()
            })
            .collect(),
        gradient: library.gradient.clone(),
        registered_gradients: Vec::new(),
    }
}

/// TensorFlow's `ReachableFunctionLibraryDefinition`: the functions of `library` that `nodes`
/// reach, transitively, through a node's op, a `func` attr or a list of `func`s, a reached
/// function's gradient, and `api_implements` (reaching one implementation of an API reaches
/// all). Functions keep their order in `library`; each reached function's gradient binding
/// is kept.
pub fn reachable_library(library: &FunctionDefLibrary, nodes: &[NodeDef]) -> FunctionDefLibrary {
    let mut walk = Walk {
        library,
        by_name: library
            .function
            .iter()
            .filter_map(|f| f.signature.as_ref().map(|s| (s.name.as_str(), f)))
            .collect(),
        reached: BTreeSet::new(),
        queue: Vec::new(),
        apis: BTreeSet::new(),
    };
    let gradients: HashMap<&str, &str> = library
        .gradient
        .iter()
        .map(|g| (g.function_name.as_str(), g.gradient_func.as_str()))
        .collect();
    for node in nodes {
        walk.visit(node);
    }
    while let Some(name) = walk.queue.pop() {
        let Some(&function) = walk.by_name.get(name) else {
            continue;
        };
        if let Some(Some(Value::S(api))) = function.attr.get(API_IMPLEMENTS).map(|a| &a.value) {
            walk.reach_api(api);
        }
        for node in &function.node_def {
            walk.visit(node);
        }
        if let Some(gradient) = gradients.get(name) {
            walk.reach(gradient);
        }
    }
    let reached = walk.reached;

    let mut kept = BTreeSet::new();
    let function = library
        .function
        .iter()
        .filter(|f| {
            f.signature
                .as_ref()
                .is_some_and(|s| reached.contains(s.name.as_str()) && kept.insert(s.name.as_str()))
        })
        .cloned()
        .collect();
    let gradient = library
        .gradient
        .iter()
        .filter(|g| reached.contains(g.function_name.as_str()))
        .map(|g| GradientDef {
            function_name: g.function_name.clone(),
            gradient_func: g.gradient_func.clone(),
        })
        .collect();
    FunctionDefLibrary {
        function,
        gradient,
        registered_gradients: Vec::new(),
    }
}

/// The state of [`reachable_library`]'s walk.
struct Walk<'a> {
    library: &'a FunctionDefLibrary,
    by_name: HashMap<&'a str, &'a FunctionDef>,
    reached: BTreeSet<&'a str>,
    queue: Vec<&'a str>,
    apis: BTreeSet<&'a [u8]>,
}

impl<'a> Walk<'a> {
    /// Marks the function `name` reached (and queues it) if it is one and was not yet.
    fn reach(&mut self, name: &str) {
        if let Some((&key, _)) = self.by_name.get_key_value(name) {
            if self.reached.insert(key) {
                self.queue.push(key);
            }
        }
    }

    /// Reaches what `node` calls: its op and the functions in its attrs.
    fn visit(&mut self, node: &NodeDef) {
        for name in node_callees(node) {
            self.reach(name);
        }
    }

    /// Reaches every function implementing `api`.
    fn reach_api(&mut self, api: &'a [u8]) {
        if !self.apis.insert(api) {
            return;
        }
        let library = self.library;
        for function in &library.function {
            let same_api = matches!(
                function.attr.get(API_IMPLEMENTS).map(|a| &a.value),
                Some(Some(Value::S(s))) if s.as_ref() == api
            );
            if let (true, Some(signature)) = (same_api, &function.signature) {
                self.reach(&signature.name);
            }
        }
    }
}

/// What `node` may call: its op, then every function its attributes name (singly or in a
/// list), in attribute order. Shared by the reachability walks over a decoded library and
/// over a [`super::index::LibraryIndex`].
pub(super) fn node_callees(node: &NodeDef) -> impl Iterator<Item = &str> {
    std::iter::once(node.op.as_str()).chain(node.attr.values().flat_map(|value| {
        let (single, list) = match &value.value {
            Some(Value::Func(f)) => (Some(f.name.as_str()), &[][..]),
            Some(Value::List(list)) => (None, &list.func[..]),
            _ => (None, &[][..]),
        };
        single
            .into_iter()
            .chain(list.iter().map(|f| f.name.as_str()))
    }))
}
