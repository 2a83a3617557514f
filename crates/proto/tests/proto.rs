//! Encoding, decoding and reflection tests for the generated types.

use std::collections::BTreeMap;

use bytes::Bytes;
use prost::{Message, Name};
use prost_reflect::{DynamicMessage, Kind, ReflectMessage, Value};
use unbound_proto::tensorflow::proto_splitter::{
    chunk_info, field_index, ChunkInfo, ChunkMetadata, ChunkedField, ChunkedMessage, FieldIndex,
    VersionDef as SplitterVersionDef,
};
use unbound_proto::tensorflow::{
    attr_value, meta_graph_def, tensor_info, AttrValue, DataType, FunctionDef, FunctionDefLibrary,
    GraphDef, MetaGraphDef, NodeDef, OpDef, SavedModel, SignatureDef, TensorInfo, TensorProto,
    TensorShapeProto, VersionDef,
};
use unbound_proto::unbound::test::{many_fields, ManyFields, StringNode, TestEnum};
use unbound_proto::{descriptor_pool, FILE_DESCRIPTOR_SET};

fn shape(dims: &[i64]) -> Option<TensorShapeProto> {
    Some(TensorShapeProto {
        dim: dims
            .iter()
            .map(|&size| unbound_proto::tensorflow::tensor_shape_proto::Dim {
                size,
                name: String::new(),
            })
            .collect(),
        unknown_rank: false,
    })
}

fn const_node(name: &str, content: &[u8]) -> NodeDef {
    let tensor = TensorProto {
        dtype: DataType::DtFloat as i32,
        tensor_shape: shape(&[content.len() as i64 / 4]),
        tensor_content: Bytes::copy_from_slice(content),
        ..Default::default()
    };
    NodeDef {
        name: name.to_owned(),
        op: "Const".to_owned(),
        attr: BTreeMap::from([
            (
                "dtype".to_owned(),
                AttrValue {
                    value: Some(attr_value::Value::Type(DataType::DtFloat as i32)),
                },
            ),
            (
                "value".to_owned(),
                AttrValue {
                    value: Some(attr_value::Value::Tensor(tensor)),
                },
            ),
        ]),
        ..Default::default()
    }
}

fn sample_saved_model() -> SavedModel {
    let graph = GraphDef {
        node: vec![
            const_node("a", &[0, 0, 128, 63, 0, 0, 0, 64]),
            const_node("b", &[1, 2, 3, 4]),
        ],
        versions: Some(VersionDef {
            producer: 1994,
            min_consumer: 12,
            bad_consumers: vec![],
        }),
        library: Some(FunctionDefLibrary {
            function: vec![FunctionDef {
                signature: Some(OpDef {
                    name: "__inference_f_12".to_owned(),
                    ..Default::default()
                }),
                ret: BTreeMap::from([("out".to_owned(), "a:output:0".to_owned())]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let signature = SignatureDef {
        inputs: BTreeMap::from([(
            "x".to_owned(),
            TensorInfo {
                encoding: Some(tensor_info::Encoding::Name(
                    "serving_default_x:0".to_owned(),
                )),
                dtype: DataType::DtFloat as i32,
                tensor_shape: shape(&[-1, 3]),
            },
        )]),
        method_name: "tensorflow/serving/predict".to_owned(),
        ..Default::default()
    };
    SavedModel {
        saved_model_schema_version: 1,
        meta_graphs: vec![MetaGraphDef {
            meta_info_def: Some(meta_graph_def::MetaInfoDef {
                tags: vec!["serve".to_owned()],
                tensorflow_version: "2.21.0".to_owned(),
                ..Default::default()
            }),
            graph_def: Some(graph),
            signature_def: BTreeMap::from([("serving_default".to_owned(), signature)]),
            ..Default::default()
        }],
    }
}

#[test]
fn saved_model_round_trip() {
    let model = sample_saved_model();
    let encoded = model.encode_to_vec();
    let decoded = SavedModel::decode(encoded.as_slice()).unwrap();
    assert_eq!(decoded, model);
    assert_eq!(decoded.encode_to_vec(), encoded);
}

#[test]
fn bytes_fields_slice_the_input_buffer() {
    let model = sample_saved_model();
    let buffer = Bytes::from(model.encode_to_vec());
    let decoded = SavedModel::decode(buffer.clone()).unwrap();
    let node = &decoded.meta_graphs[0].graph_def.as_ref().unwrap().node[0];
    let Some(attr_value::Value::Tensor(tensor)) = &node.attr["value"].value else {
        panic!("value attr is not a tensor");
    };
    let content = tensor.tensor_content.as_ptr() as usize;
    let start = buffer.as_ptr() as usize;
    assert!(
        content >= start && content + tensor.tensor_content.len() <= start + buffer.len(),
        "tensor_content was copied instead of sliced"
    );
}

#[test]
fn chunk_metadata_round_trip_and_wire_format() {
    let metadata = ChunkMetadata {
        version: Some(SplitterVersionDef {
            splitter_version: 1,
            join_version: 0,
            bad_consumers: vec![],
        }),
        chunks: vec![
            ChunkInfo {
                r#type: chunk_info::Type::Message as i32,
                size: 120,
                offset: 0,
            },
            ChunkInfo {
                r#type: chunk_info::Type::Bytes as i32,
                size: 4000,
                offset: 136,
            },
        ],
        message: Some(ChunkedMessage {
            chunk_index: Some(0),
            chunked_fields: vec![ChunkedField {
                field_tag: vec![
                    FieldIndex {
                        kind: Some(field_index::Kind::Field(1)),
                    },
                    FieldIndex {
                        kind: Some(field_index::Kind::Index(2)),
                    },
                    FieldIndex {
                        kind: Some(field_index::Kind::MapKey(field_index::MapKey {
                            r#type: Some(field_index::map_key::Type::Boolean(true)),
                        })),
                    },
                ],
                message: Some(ChunkedMessage {
                    chunk_index: Some(1),
                    chunked_fields: vec![],
                }),
            }],
        }),
    };
    let encoded = metadata.encode_to_vec();
    assert_eq!(ChunkMetadata::decode(encoded.as_slice()).unwrap(), metadata);

    // `chunk_index` has explicit presence: index 0 is written, unset is not.
    let with_zero = ChunkedMessage {
        chunk_index: Some(0),
        chunked_fields: vec![],
    };
    assert_eq!(with_zero.encode_to_vec(), [0x08, 0x00]);
    assert!(ChunkedMessage::default().encode_to_vec().is_empty());
    assert_eq!(
        ChunkedMessage::decode([0x08u8, 0x00].as_slice())
            .unwrap()
            .chunk_index,
        Some(0)
    );

    // Oneof members are written even when zero.
    let field_zero = FieldIndex {
        kind: Some(field_index::Kind::Field(0)),
    };
    assert_eq!(field_zero.encode_to_vec(), [0x08, 0x00]);
}

#[test]
fn many_fields_round_trip() {
    let leaf = ManyFields {
        string_field: "leaf".to_owned(),
        ..Default::default()
    };
    let message = ManyFields {
        field_one: Some(Box::new(leaf.clone())),
        repeated_field: vec![leaf.clone(), ManyFields::default()],
        string_field: "root".to_owned(),
        repeated_string_field: vec!["x".to_owned(), String::new()],
        map_field_uint32: BTreeMap::from([(7, "seven".to_owned())]),
        map_field_int64: BTreeMap::from([(-3, "minus three".to_owned())]),
        nested_map_bool: BTreeMap::from([(false, leaf.clone()), (true, leaf.clone())]),
        nested_map_string: BTreeMap::from([("k".to_owned(), leaf.clone())]),
        nested_map_int32: BTreeMap::from([(i32::MIN, leaf.clone())]),
        nested_map_int64: BTreeMap::from([(i64::MAX, leaf.clone())]),
        nested_map_uint32: BTreeMap::from([(u32::MAX, leaf.clone())]),
        nested_map_uint64: BTreeMap::from([(u64::MAX, leaf.clone())]),
        nested_map_sint32: BTreeMap::from([(-1, leaf.clone())]),
        nested_map_sint64: BTreeMap::from([(-2, leaf.clone())]),
        nested_map_fixed32: BTreeMap::from([(3, leaf.clone())]),
        nested_map_fixed64: BTreeMap::from([(4, leaf.clone())]),
        nested_map_sfixed32: BTreeMap::from([(-5, leaf.clone())]),
        nested_map_sfixed64: BTreeMap::from([(-6, leaf.clone())]),
        map_field_string_bytes: BTreeMap::from([("b".to_owned(), Bytes::from_static(b"\0\x01"))]),
        int32_field: -1,
        int64_field: i64::MIN,
        uint32_field: u32::MAX,
        uint64_field: u64::MAX,
        sint32_field: i32::MIN,
        sint64_field: i64::MIN,
        fixed32_field: 1,
        fixed64_field: 2,
        sfixed32_field: -3,
        sfixed64_field: -4,
        float_field: 1.5,
        double_field: -2.25,
        bool_field: true,
        enum_field: TestEnum::Negative as i32,
        bytes_field: Bytes::from_static(b"bytes"),
        packed_int32: vec![1, -1],
        packed_sint64: vec![-7, 7],
        packed_double: vec![0.5],
        packed_enum: vec![TestEnum::One as i32, TestEnum::Negative as i32],
        unpacked_int32: vec![1, -1],
        unpacked_fixed64: vec![9, 10],
        unpacked_bool: vec![true, false],
        unpacked_enum: vec![TestEnum::Two as i32],
        repeated_bytes_field: vec![Bytes::new(), Bytes::from_static(b"x")],
        optional_int32: Some(0),
        optional_string: Some(String::new()),
        optional_bytes: None,
        choice: Some(many_fields::Choice::ChoiceMessage(Box::new(leaf))),
        max_number_field: "max".to_owned(),
        ..Default::default()
    };
    let encoded = message.encode_to_vec();
    assert_eq!(ManyFields::decode(encoded.as_slice()).unwrap(), message);

    // The same through reflection: every field survives a dynamic round trip.
    // (DynamicMessage keeps map entries unordered, so compare decoded values,
    // not bytes.)
    let dynamic = message.transcode_to_dynamic();
    assert_eq!(dynamic.transcode_to::<ManyFields>().unwrap(), message);
    assert_eq!(
        ManyFields::decode(dynamic.encode_to_vec().as_slice()).unwrap(),
        message
    );
}

#[test]
fn packing_follows_the_schema() {
    let packed = ManyFields {
        packed_int32: vec![1, 2],
        ..Default::default()
    };
    // Field 40, wire type 2: tag 0xC2 0x02, length 2, values.
    assert_eq!(packed.encode_to_vec(), [0xC2, 0x02, 0x02, 0x01, 0x02]);
    let unpacked = ManyFields {
        unpacked_int32: vec![1, 2],
        ..Default::default()
    };
    // Field 60, wire type 0, once per element.
    assert_eq!(
        unpacked.encode_to_vec(),
        [0xE0, 0x03, 0x01, 0xE0, 0x03, 0x02]
    );
}

#[test]
fn map_entries_are_encoded_in_key_order() {
    let mut a = ManyFields::default();
    let mut b = ManyFields::default();
    for key in [3u32, 1, 2] {
        a.map_field_uint32.insert(key, key.to_string());
    }
    for key in [2u32, 3, 1] {
        b.map_field_uint32.insert(key, key.to_string());
    }
    let encoded = a.encode_to_vec();
    assert_eq!(encoded, b.encode_to_vec());
    // First entry: field 5, entry {key 1, value "1"}.
    assert_eq!(&encoded[..7], [0x2A, 0x05, 0x08, 0x01, 0x12, 0x01, b'1']);
}

#[test]
fn string_node_tree_round_trip() {
    fn tree(depth: u32, name: &str) -> StringNode {
        StringNode {
            val: name.to_owned(),
            child_nodes: if depth == 0 {
                vec![]
            } else {
                (0..2)
                    .map(|i| tree(depth - 1, &format!("{name}{i}")))
                    .collect()
            },
        }
    }
    let root = tree(4, "n");
    let encoded = root.encode_to_vec();
    assert_eq!(StringNode::decode(encoded.as_slice()).unwrap(), root);
}

#[test]
fn descriptor_pool_contains_the_schemas() {
    let pool = descriptor_pool();
    for name in [
        "tensorflow.SavedModel",
        "tensorflow.MetaGraphDef",
        "tensorflow.MetaGraphDef.MetaInfoDef",
        "tensorflow.GraphDef",
        "tensorflow.NodeDef.ExperimentalDebugInfo",
        "tensorflow.TensorProto",
        "tensorflow.SavedObjectGraph",
        "tensorflow.StructuredValue",
        "tensorflow.FingerprintDef",
        "tensorflow.BundleEntryProto",
        "tensorflow.TrackableObjectGraph.TrackableObject.SerializedTensor",
        "tensorflow.proto_splitter.ChunkMetadata",
        "tensorflow.proto_splitter.FieldIndex.MapKey",
        "tensorflow.proto_splitter.VersionDef",
        "unbound.test.ManyFields",
        "google.protobuf.Any",
        "google.protobuf.BoolValue",
    ] {
        assert!(pool.get_message_by_name(name).is_some(), "{name} missing");
    }
    for name in ["tensorflow.DataType", "tensorflow.FullTypeId"] {
        assert!(pool.get_enum_by_name(name).is_some(), "{name} missing");
    }
    let data_type = pool.get_enum_by_name("tensorflow.DataType").unwrap();
    assert_eq!(
        data_type
            .get_value_by_name("DT_FLOAT_REF")
            .unwrap()
            .number(),
        101
    );
    assert_eq!(
        data_type
            .get_value_by_name("DT_FLOAT4_E2M1FN_REF")
            .unwrap()
            .number(),
        133
    );

    // The embedded set decodes as plain descriptors too.
    let set = prost_types::FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).unwrap();
    let names: Vec<_> = set.file.iter().map(|f| f.name()).collect();
    assert!(names.contains(&"tensorflow/core/protobuf/saved_model.proto"));
    assert!(names.contains(&"tensorflow/tools/proto_splitter/chunk.proto"));
    assert!(names.contains(&"google/protobuf/any.proto"));
}

#[test]
fn generated_types_know_their_descriptors() {
    assert_eq!(
        SavedModel::default().descriptor().full_name(),
        "tensorflow.SavedModel"
    );
    assert_eq!(
        meta_graph_def::MetaInfoDef::default()
            .descriptor()
            .full_name(),
        "tensorflow.MetaGraphDef.MetaInfoDef"
    );
    assert_eq!(
        field_index::MapKey::default().descriptor().full_name(),
        "tensorflow.proto_splitter.FieldIndex.MapKey"
    );
    assert_eq!(
        SplitterVersionDef::full_name(),
        "tensorflow.proto_splitter.VersionDef"
    );
    assert_eq!(
        GraphDef::type_url(),
        "type.googleapis.com/tensorflow.GraphDef"
    );
    // Same-named messages in different scopes resolve to different descriptors.
    assert_eq!(
        unbound_proto::tensorflow::ListValue::default()
            .descriptor()
            .full_name(),
        "tensorflow.ListValue"
    );
    assert_eq!(
        attr_value::ListValue::default().descriptor().full_name(),
        "tensorflow.AttrValue.ListValue"
    );
}

#[test]
fn map_key_kinds_through_reflection() {
    let many = ManyFields::default().descriptor();
    let expected = [
        ("map_field_uint32", Kind::Uint32),
        ("map_field_int64", Kind::Int64),
        ("nested_map_bool", Kind::Bool),
        ("nested_map_string", Kind::String),
        ("nested_map_int32", Kind::Int32),
        ("nested_map_int64", Kind::Int64),
        ("nested_map_uint32", Kind::Uint32),
        ("nested_map_uint64", Kind::Uint64),
        ("nested_map_sint32", Kind::Sint32),
        ("nested_map_sint64", Kind::Sint64),
        ("nested_map_fixed32", Kind::Fixed32),
        ("nested_map_fixed64", Kind::Fixed64),
        ("nested_map_sfixed32", Kind::Sfixed32),
        ("nested_map_sfixed64", Kind::Sfixed64),
        ("map_field_string_bytes", Kind::String),
    ];
    for (name, key_kind) in expected {
        let field = many.get_field_by_name(name).unwrap();
        assert!(field.is_map(), "{name} is not a map");
        let Kind::Message(entry) = field.kind() else {
            panic!("{name}: map entry is not a message");
        };
        assert_eq!(entry.map_entry_key_field().kind(), key_kind, "{name}");
    }
    assert!(!many.get_field_by_name("repeated_field").unwrap().is_map());

    let pool = descriptor_pool();
    let key_kind = |message: &str, field: &str| {
        let field = pool
            .get_message_by_name(message)
            .unwrap()
            .get_field_by_name(field)
            .unwrap();
        assert!(field.is_map(), "{message}.{} is not a map", field.name());
        match field.kind() {
            Kind::Message(entry) => entry.map_entry_key_field().kind(),
            other => panic!("unexpected kind {other:?}"),
        }
    };
    assert_eq!(key_kind("tensorflow.NodeDef", "attr"), Kind::String);
    assert_eq!(key_kind("tensorflow.FunctionDef", "arg_attr"), Kind::Uint32);
    assert_eq!(
        key_kind("tensorflow.GraphDebugInfo", "frames_by_id"),
        Kind::Fixed64
    );
    assert_eq!(
        key_kind("tensorflow.MetaGraphDef", "signature_def"),
        Kind::String
    );
}

#[test]
fn dynamic_messages_read_typed_encodings() {
    let model = sample_saved_model();
    let encoded = model.encode_to_vec();
    let desc = descriptor_pool()
        .get_message_by_name("tensorflow.SavedModel")
        .unwrap();
    let dynamic = DynamicMessage::decode(desc, encoded.as_slice()).unwrap();
    assert_eq!(
        dynamic
            .get_field_by_name("saved_model_schema_version")
            .unwrap()
            .as_ref(),
        &Value::I64(1)
    );
    let meta_graphs = dynamic.get_field_by_name("meta_graphs").unwrap();
    assert_eq!(meta_graphs.as_list().unwrap().len(), 1);
    assert_eq!(
        SavedModel::decode(dynamic.encode_to_vec().as_slice()).unwrap(),
        model
    );
}
