//! The generated `fields` constants agree with the descriptor pool, and cover every field of
//! every message in it.

use unbound_proto::descriptor_pool;
use unbound_proto::fields::tensorflow::{
    attr_value, function_def, function_def_library, graph_def, meta_graph_def, name_attr_list,
    node_def, op_def, op_list, proto_splitter, saved_model, saved_object_graph, version_def,
};

/// `(full field name, generated constant)` for every generated constant.
const TABLE: &[(&str, u32)] = include!(concat!(env!("OUT_DIR"), "/fields_table.rs"));

#[test]
fn every_constant_is_its_fields_number() {
    let pool = descriptor_pool();
    for &(full_name, number) in TABLE {
        let (message, field) = full_name.rsplit_once('.').unwrap();
        let message = pool
            .get_message_by_name(message)
            .unwrap_or_else(|| panic!("no message for {full_name}"));
        let field = message
            .get_field_by_name(field)
            .unwrap_or_else(|| panic!("no field {full_name}"));
        assert_eq!(field.number(), number, "{full_name}");
    }
}

#[test]
fn every_field_has_a_constant() {
    let pool = descriptor_pool();
    let mut names: Vec<String> = pool
        .all_messages()
        .flat_map(|m| {
            m.fields()
                .map(|f| f.full_name().to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    names.sort();
    let mut table: Vec<String> = TABLE.iter().map(|(n, _)| n.to_string()).collect();
    table.sort();
    assert_eq!(names, table);
}

#[test]
fn the_numbers_the_workspace_navigates_by() {
    assert_eq!(saved_model::SAVED_MODEL_SCHEMA_VERSION, 1);
    assert_eq!(saved_model::META_GRAPHS, 2);
    assert_eq!(meta_graph_def::GRAPH_DEF, 2);
    assert_eq!(meta_graph_def::SIGNATURE_DEF, 5);
    assert_eq!(meta_graph_def::OBJECT_GRAPH_DEF, 7);
    assert_eq!(graph_def::NODE, 1);
    assert_eq!(graph_def::LIBRARY, 2);
    assert_eq!(graph_def::VERSIONS, 4);
    assert_eq!(version_def::PRODUCER, 1);
    assert_eq!(function_def_library::FUNCTION, 1);
    assert_eq!(function_def::SIGNATURE, 1);
    assert_eq!(function_def::NODE_DEF, 3);
    assert_eq!(op_def::NAME, 1);
    assert_eq!(op_list::OP, 1);
    assert_eq!(node_def::NAME, 1);
    assert_eq!(node_def::OP, 2);
    assert_eq!(node_def::ATTR, 5);
    assert_eq!(node_def::attr_entry::KEY, 1);
    assert_eq!(node_def::attr_entry::VALUE, 2);
    assert_eq!(attr_value::LIST, 1);
    assert_eq!(attr_value::S, 2);
    assert_eq!(attr_value::I, 3);
    assert_eq!(attr_value::F, 4);
    assert_eq!(attr_value::B, 5);
    assert_eq!(attr_value::TYPE, 6);
    assert_eq!(attr_value::SHAPE, 7);
    assert_eq!(attr_value::TENSOR, 8);
    assert_eq!(attr_value::PLACEHOLDER, 9);
    assert_eq!(attr_value::FUNC, 10);
    assert_eq!(attr_value::list_value::FUNC, 9);
    assert_eq!(name_attr_list::NAME, 1);
    assert_eq!(saved_object_graph::CONCRETE_FUNCTIONS, 2);
    assert_eq!(proto_splitter::chunked_message::CHUNKED_FIELDS, 2);
    assert_eq!(unbound_proto::fields::google::protobuf::any::TYPE_URL, 1);
}
