//! Graph-building helpers shared by the tests (the SDK's, under the names the tests use).
#![allow(unused_imports)]

pub use unbound_grappler_sdk::test_graphs::{
    graph, inputs, name_set as set, names, node as n, typed_node as typed,
};
