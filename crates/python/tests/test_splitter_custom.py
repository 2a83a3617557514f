"""Subclassing `unbound.Splitter` as the seed's guide does (`ModelConfigSplitter` composed with
`LayerSplitter`), for a message type unbound has never seen: the chunk metadata, the merge,
and TensorFlow's C++ Merger reading the `.cpb` with the type's schema."""

from __future__ import annotations

import pytest

import unbound
from _toolkit_support import tf_read


def model_config_classes():
    """`ModelConfig` and `Layer` from the seed's guide, built at run time (no protoc)."""
    from google.protobuf import descriptor_pb2, descriptor_pool

    from unbound._splitter import class_of

    F = descriptor_pb2.FieldDescriptorProto
    file = descriptor_pb2.FileDescriptorProto(name="seed/model_config.proto", package="seed", syntax="proto3")
    enum = file.enum_type.add(name="ActivationFunction")
    for i, name in enumerate(["RELU", "SIGMOID", "TANH"]):
        enum.value.add(name=name, number=i)
    layer = file.message_type.add(name="Layer")
    layer.field.add(name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    layer.field.add(name="num_units", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    layer.field.add(name="activation_function", number=3, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                    type_name=".seed.ActivationFunction")
    config = file.message_type.add(name="ModelConfig")
    config.field.add(name="model_name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    config.field.add(name="input_shape", number=2, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    config.field.add(name="hidden_layers", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                     type_name=".seed.Layer")
    config.field.add(name="output_units", number=4, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    config.field.add(name="output_activation", number=5, type=F.TYPE_ENUM, label=F.LABEL_OPTIONAL,
                     type_name=".seed.ActivationFunction")
    config.field.add(name="hyperparameters", number=6, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                     type_name=".seed.ModelConfig.HyperparametersEntry")
    entry = config.nested_type.add(name="HyperparametersEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    schema = descriptor_pb2.FileDescriptorSet(file=[file]).SerializeToString()
    return class_of(pool.FindMessageTypeByName("seed.ModelConfig")), class_of(pool.FindMessageTypeByName("seed.Layer")), schema


class ModelConfigSplitter(unbound.Splitter):
    """The seed's example: hyperparameters as text chunks, each layer by a child splitter."""

    def build_chunks(self):
        for k, v in sorted(self._proto.hyperparameters.items()):
            self.add_chunk(bytes(str(v), "utf-8"), ["hyperparameters", k])
        for i, layer in enumerate(self._proto.hidden_layers):
            LayerSplitter(layer, parent_splitter=self, fields_in_parent=["hidden_layers", i]).build_chunks()


class LayerSplitter(unbound.Splitter):
    """The seed's example child: the layer itself, as one chunk."""

    def build_chunks(self):
        self.add_chunk(self._proto, [])


def sample(ModelConfig):
    config = ModelConfig(model_name="mlp", input_shape=784, output_units=10, output_activation=1)
    for i, units in enumerate([512, 256, 128]):
        config.hidden_layers.add(name=f"dense_{i}", num_units=units, activation_function=i % 3)
    config.hyperparameters["learning_rate"] = 0.5
    config.hyperparameters["dropout"] = 0.25
    return config


def test_the_seed_example_chunks_and_metadata():
    ModelConfig, _, _ = model_config_classes()
    config = sample(ModelConfig)
    with pytest.warns(unbound.TensorFlowCompatibilityWarning, match="hyperparameters"):
        chunks, cm = ModelConfigSplitter(config).split()
    assert chunks[0] is config
    assert chunks[1:3] == [b"0.25", b"0.5"]
    assert chunks[3:] == list(config.hidden_layers)
    assert cm.chunk_index == 0
    tags = [[(t.WhichOneof("kind"), getattr(t, t.WhichOneof("kind"))) for t in f.field_tag] for f in cm.chunked_fields]
    assert tags[0][0] == ("field", 6) and tags[0][1][0] == "map_key" and tags[0][1][1].s == "dropout"
    assert tags[2:] == [[("field", 3), ("index", i)] for i in range(3)]
    assert [f.message.chunk_index for f in cm.chunked_fields] == [1, 2, 3, 4, 5]
    merged = ModelConfig()
    unbound.Merger.merge(chunks, cm, merged)
    assert merged == config


def test_the_seed_example_is_read_by_unbound_but_not_tensorflow(tmp_path):
    # The guide's example puts text chunks at map values (`hyperparameters[k]`, a float).
    # TensorFlow's Python splitter writes that, but its C++ Merger aborts on it (it takes
    # bytes chunks only for singular fields): unbound warns, writes, and reads it back.
    ModelConfig, _, schema = model_config_classes()
    config = sample(ModelConfig)
    with pytest.warns(unbound.TensorFlowCompatibilityWarning):
        assert ModelConfigSplitter(config, compression="brotli").write(tmp_path / "config").endswith(".cpb")
    back = ModelConfig()
    unbound.Merger.read(tmp_path / "config", back)
    assert back == config
    (tmp_path / "schema.fds").write_bytes(schema)
    with pytest.raises(AssertionError, match="Field is not the right type"):
        tf_read("seed.ModelConfig", tmp_path / "config", tmp_path / "tf.pb", tmp_path / "schema.fds")


class LayersSplitter(unbound.Splitter):
    """The seed's example without the hyperparameter chunks: what TensorFlow can read."""

    def build_chunks(self):
        for i, layer in enumerate(self._proto.hidden_layers):
            LayerSplitter(layer, parent_splitter=self, fields_in_parent=["hidden_layers", i]).build_chunks()


def test_the_seed_example_layers_are_read_by_tensorflow(tmp_path):
    ModelConfig, _, schema = model_config_classes()
    config = sample(ModelConfig)
    assert LayersSplitter(config, compression="brotli").write(tmp_path / "config").endswith(".cpb")
    (tmp_path / "schema.fds").write_bytes(schema)
    tf = ModelConfig.FromString(tf_read("seed.ModelConfig", tmp_path / "config", tmp_path / "tf.pb", tmp_path / "schema.fds"))
    assert tf == config
    back = ModelConfig()
    unbound.Merger.read(tmp_path / "config", back)
    assert back == config


class MovingSplitter(unbound.Splitter):
    """Moves the layers out of the message (chunks filled after they are added, one inserted
    at the front), as TensorFlow's repeated-field splitter does."""

    def build_chunks(self):
        ModelConfig = type(self._proto)
        holder = ModelConfig()
        self.add_chunk(holder, [])  # filled below, after being placed
        holder.hidden_layers.extend(self._proto.hidden_layers[1:])
        self.add_chunk(self._proto.hidden_layers[0], ["hidden_layers", 0], index=1)
        first = type(self._proto.hidden_layers[0])()
        first.CopyFrom(self._proto.hidden_layers[0])
        self._chunks[1] = first
        del self._proto.hidden_layers[1:]
        self._proto.hidden_layers[0].Clear()


def test_moved_fields_insertions_and_late_filled_chunks(tmp_path):
    ModelConfig, _, schema = model_config_classes()
    original = sample(ModelConfig)
    config = ModelConfig()
    config.CopyFrom(original)
    splitter = MovingSplitter(config)
    chunks, cm = splitter.split()
    assert len(chunks) == 3 and chunks[0] is config and len(chunks[2].hidden_layers) == 2
    # Chunk indices follow the chunks' final positions (TensorFlow's _fix_chunks).
    assert [f.message.chunk_index for f in cm.chunked_fields] == [2, 1]
    merged = ModelConfig()
    unbound.Merger.merge(chunks, cm, merged)
    assert merged == original
    splitter.write(tmp_path / "moved")
    (tmp_path / "schema.fds").write_bytes(schema)
    tf = ModelConfig.FromString(tf_read("seed.ModelConfig", tmp_path / "moved", tmp_path / "tf.pb", tmp_path / "schema.fds"))
    assert tf == original


def test_no_initial_chunk(tmp_path):
    ModelConfig, Layer, schema = model_config_classes()
    config = sample(ModelConfig)

    class LayersOnly(unbound.Splitter):
        def build_chunks(self):
            for i, layer in enumerate(self._proto.hidden_layers):
                self.add_chunk(layer, ["hidden_layers", i])

    chunks, cm = LayersOnly(config, proto_as_initial_chunk=False).split()
    assert not cm.HasField("chunk_index") and len(chunks) == 3
    merged = ModelConfig()
    unbound.Merger.merge(chunks, cm, merged)
    assert list(merged.hidden_layers) == list(config.hidden_layers) and merged.model_name == ""
    LayersOnly(config, proto_as_initial_chunk=False).write(tmp_path / "blank")
    (tmp_path / "schema.fds").write_bytes(schema)
    tf = ModelConfig.FromString(tf_read("seed.ModelConfig", tmp_path / "blank", tmp_path / "tf.pb", tmp_path / "schema.fds"))
    assert tf == merged


def test_nothing_split_writes_a_pb(tmp_path):
    ModelConfig, _, _ = model_config_classes()
    config = sample(ModelConfig)

    class Nothing(unbound.Splitter):
        def build_chunks(self):
            pass

    path = Nothing(config).write(tmp_path / "plain")
    assert path == str(tmp_path / "plain.pb")
    assert (tmp_path / "plain.pb").read_bytes() == config.SerializeToString(deterministic=True)
    back = ModelConfig()
    unbound.Merger.read(tmp_path / "plain", back)
    assert back == config


def test_misuse_is_refused():
    ModelConfig, Layer, _ = model_config_classes()
    config = sample(ModelConfig)

    class BadPath(unbound.Splitter):
        def build_chunks(self):
            self.add_chunk(b"x", ["no_such_field"])

    with pytest.raises(unbound.InvalidArgumentError, match="no_such_field"):
        BadPath(config).split()
    child = LayerSplitter(config.hidden_layers[0], parent_splitter=ModelConfigSplitter(config), fields_in_parent=["hidden_layers", 0])
    with pytest.raises(unbound.InvalidArgumentError, match="parent"):
        child.split()
    with pytest.raises(NotImplementedError):
        unbound.Splitter(config.hidden_layers[0], parent_splitter=ModelConfigSplitter(config),
                         fields_in_parent=["hidden_layers", 0]).build_chunks()
    with pytest.raises(unbound.InvalidArgumentError):
        unbound.Splitter(42)
