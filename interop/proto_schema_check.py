#!/usr/bin/env python3
"""Compare unbound-proto's schemas with TensorFlow's own descriptors.

Run with the Python of an environment where TensorFlow is installed:

    cargo run -p unbound-proto --example dump_descriptors -- /tmp/unbound.binpb
    $TF_VENV/bin/python interop/proto_schema_check.py /tmp/unbound.binpb

TensorFlow's side comes from two places:

* the `_pb2` modules under `tensorflow/core/{framework,protobuf,util}`
  (imported into Python's default descriptor pool);
* the serialized file descriptors compiled into `libtensorflow_framework.so.2`
  for the proto splitter files the wheel has no `_pb2` module for
  (`tools/proto_splitter/chunk.proto`, `versions.proto` and the test data
  `testdata/test_message.proto`).

Every message and enum of the given FileDescriptorSet whose full name
TensorFlow also defines is compared: fields (number, name, type, label,
presence, type name, oneof membership, map-ness with key and value types,
effective packing, default value, deprecation), oneofs, nested types, enum
values, reserved ranges and names. Messages of TensorFlow files we mirror but
do not define are reported too. `unbound.test.*` messages that mirror
TensorFlow's proto splitter test data are compared with
`tensorflow.proto_splitter_testdata.*`, allowing extra fields on our side.
Files in REDUCED_FILES (XLA's `xla_data.proto`, of which unbound mirrors only
`OpSharding` and what it references) are compared as subsets.

Prints the differences and a summary line; exits 1 if there is any
difference, 2 on usage or setup errors.
"""

from __future__ import annotations

import argparse
import glob
import importlib
import importlib.util
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from google.protobuf import descriptor_pb2  # noqa: E402
from google.protobuf import descriptor_pool  # noqa: E402
from google.protobuf.descriptor import FieldDescriptor  # noqa: E402

# Files compiled into libtensorflow_framework.so.2 that have no _pb2 module.
SO_FILES = (
    "tensorflow/tools/proto_splitter/versions.proto",
    "tensorflow/tools/proto_splitter/chunk.proto",
    "tensorflow/tools/proto_splitter/testdata/test_message.proto",
)

# Our test package mirrors TensorFlow's proto splitter test data package.
MIRRORED_PACKAGES = {"unbound.test": "tensorflow.proto_splitter_testdata"}

# TensorFlow files we mirror only in part (the messages and fields unbound reads): what we
# define must equal TensorFlow's, but missing fields, nested types, reserved ranges and
# top-level types are not differences.
REDUCED_FILES = {"xla/xla_data.proto"}

TYPE_NAMES = {
    v: k[len("TYPE_"):].lower()
    for k, v in vars(FieldDescriptor).items()
    if k.startswith("TYPE_") and isinstance(v, int)
}


# ---------------------------------------------------------------- loading


def load_set(path: str) -> descriptor_pb2.FileDescriptorSet:
    fds = descriptor_pb2.FileDescriptorSet()
    with open(path, "rb") as f:
        fds.ParseFromString(f.read())
    return fds


def pool_from_set(fds: descriptor_pb2.FileDescriptorSet) -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for file in fds.file:  # dependencies come first (protox orders them)
        pool.Add(file)
    return pool


def tensorflow_dir() -> str:
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("proto_schema_check: TensorFlow is not importable from this Python")
    return list(spec.submodule_search_locations)[0]


def import_tf_pb2_modules(tf_dir: str) -> list[str]:
    """Imports TensorFlow's core _pb2 modules; returns those that failed."""
    failed = []
    for sub in ("core/framework", "core/protobuf", "core/util"):
        for path in sorted(glob.glob(os.path.join(tf_dir, sub, "*_pb2.py"))):
            module = "tensorflow." + sub.replace("/", ".") + "." + os.path.basename(path)[:-3]
            try:
                importlib.import_module(module)
            except Exception as err:  # a broken optional module must not stop the check
                failed.append(f"{module}: {err}")
    return failed


def _varint(data: bytes, i: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return result, i


# FileDescriptorProto field number -> wire type.
_FDP_WIRE = {1: 2, 2: 2, 3: 2, 4: 2, 5: 2, 6: 2, 7: 2, 8: 2, 9: 2, 10: 0, 11: 0, 12: 2, 14: 0}


def extract_file_descriptor(blob: bytes, name: str) -> descriptor_pb2.FileDescriptorProto | None:
    """Finds the serialized FileDescriptorProto of `name` inside a binary.

    The generated C++ code embeds each file's descriptor as one byte string
    starting with field 1 (the file name). From there, fields are read while
    they look like FileDescriptorProto fields; the longest such prefix that
    parses and names the file is the descriptor.
    """
    encoded = name.encode()
    pattern = bytes([0x0A, len(encoded)]) + encoded
    start = blob.find(pattern)
    while start >= 0:
        end = start
        try:
            while end < len(blob):
                tag, k = _varint(blob, end)
                if _FDP_WIRE.get(tag >> 3) != (tag & 7):
                    break
                if tag & 7 == 0:
                    _, k = _varint(blob, k)
                else:
                    length, k = _varint(blob, k)
                    k += length
                if k > len(blob):
                    break
                end = k
        except IndexError:
            pass
        proto = descriptor_pb2.FileDescriptorProto()
        try:
            proto.ParseFromString(blob[start:end])
            if proto.name == name and (proto.message_type or proto.enum_type):
                return proto
        except Exception:
            pass
        start = blob.find(pattern, start + 1)
    return None


def load_so_pool(tf_dir: str, lib: str | None) -> tuple[descriptor_pool.DescriptorPool, list[str], list[str]]:
    path = lib or os.path.join(tf_dir, "libtensorflow_framework.so.2")
    pool = descriptor_pool.DescriptorPool()
    found, missing = [], []
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as err:
        return pool, found, [f"{path}: {err}"]
    for name in SO_FILES:
        proto = extract_file_descriptor(blob, name)
        if proto is None:
            missing.append(name)
            continue
        try:
            pool.Add(proto)
            found.append(name)
        except Exception as err:
            missing.append(f"{name}: {err}")
    return pool, found, missing


# ---------------------------------------------------------------- comparing


class Checker:
    def __init__(self, tf_pools: list[descriptor_pool.DescriptorPool]):
        self.tf_pools = tf_pools
        self.diffs: list[str] = []
        self.messages = 0
        self.enums = 0
        self.mirrored = 0

    # Lookup ---------------------------------------------------------------

    def tf_message(self, full_name: str):
        for pool in self.tf_pools:
            try:
                return pool.FindMessageTypeByName(full_name)
            except KeyError:
                pass
        return None

    def tf_enum(self, full_name: str):
        for pool in self.tf_pools:
            try:
                return pool.FindEnumTypeByName(full_name)
            except KeyError:
                pass
        return None

    def diff(self, where: str, what: str) -> None:
        self.diffs.append(f"{where}: {what}")

    # Fields ---------------------------------------------------------------

    @staticmethod
    def label(f) -> str:
        if f.is_required:
            return "required"
        if f.is_repeated:
            return "repeated"
        return "optional"

    @staticmethod
    def type_name(f, rename) -> str:
        if f.message_type is not None:
            return rename(f.message_type.full_name)
        if f.enum_type is not None:
            return rename(f.enum_type.full_name)
        return ""

    @staticmethod
    def oneof(f) -> str:
        o = f.containing_oneof
        return o.name if o is not None else ""

    @staticmethod
    def is_map(f) -> bool:
        return f.message_type is not None and f.message_type.GetOptions().map_entry

    def field_facts(self, f, rename) -> dict:
        facts = {
            "name": f.name,
            "type": TYPE_NAMES.get(f.type, str(f.type)),
            "label": self.label(f),
            "presence": f.has_presence,
            "type_name": self.type_name(f, rename),
            "oneof": self.oneof(f),
            "map": self.is_map(f),
            "deprecated": bool(f.GetOptions().deprecated),
        }
        if f.is_repeated and f.cpp_type != FieldDescriptor.CPPTYPE_MESSAGE and f.cpp_type != FieldDescriptor.CPPTYPE_STRING:
            facts["packed"] = f.is_packed
        if f.has_default_value:
            facts["default"] = f.default_value
        if facts["map"]:
            entry = f.message_type
            key, value = entry.fields_by_name["key"], entry.fields_by_name["value"]
            facts["map_key"] = TYPE_NAMES[key.type]
            facts["map_value"] = TYPE_NAMES[value.type] + (
                " " + self.type_name(value, rename) if self.type_name(value, rename) else ""
            )
        return facts

    # Messages ---------------------------------------------------------------

    def compare_message(self, ours, tf, rename=lambda n: n, allow_extra=False, subset=False) -> None:
        where = ours.full_name
        if not ours.GetOptions().map_entry:
            self.messages += 1

        our_fields = {f.number: f for f in ours.fields}
        tf_fields = {f.number: f for f in tf.fields}
        for number in sorted(tf_fields.keys() - our_fields.keys()):
            if not subset:
                self.diff(where, f"missing field {tf_fields[number].name} = {number}")
        if not allow_extra:
            for number in sorted(our_fields.keys() - tf_fields.keys()):
                self.diff(where, f"extra field {our_fields[number].name} = {number} (TensorFlow has none)")
        for number in sorted(our_fields.keys() & tf_fields.keys()):
            a = self.field_facts(our_fields[number], lambda n: n)
            b = self.field_facts(tf_fields[number], rename)
            for key in sorted(a.keys() | b.keys()):
                if a.get(key) != b.get(key):
                    self.diff(
                        f"{where}.{tf_fields[number].name} (= {number})",
                        f"{key}: ours {a.get(key)!r}, TensorFlow {b.get(key)!r}",
                    )

        # Oneofs: names, members, synthetic-ness.
        our_p, tf_p = descriptor_pb2.DescriptorProto(), descriptor_pb2.DescriptorProto()
        ours.CopyToProto(our_p)
        tf.CopyToProto(tf_p)

        def oneofs(desc, proto):
            synthetic = {f.name for f in proto.field if f.proto3_optional}
            return {
                o.name: (sorted(f.name for f in o.fields), any(f.name in synthetic for f in o.fields))
                for o in desc.oneofs
            }

        a_oneofs, b_oneofs = oneofs(ours, our_p), oneofs(tf, tf_p)
        for name in sorted(a_oneofs.keys() | b_oneofs.keys()):
            a, b = a_oneofs.get(name), b_oneofs.get(name)
            if a == b:
                continue
            if allow_extra and b is None:
                continue
            self.diff(where, f"oneof {name}: ours {a!r}, TensorFlow {b!r}")

        # Reserved ranges and names.
        def reserved(proto):
            return (sorted((r.start, r.end) for r in proto.reserved_range), sorted(proto.reserved_name))

        if not allow_extra and not subset and reserved(our_p) != reserved(tf_p):
            self.diff(where, f"reserved: ours {reserved(our_p)!r}, TensorFlow {reserved(tf_p)!r}")

        # Nested messages and enums.
        our_nested = {m.name: m for m in ours.nested_types}
        tf_nested = {m.name: m for m in tf.nested_types}
        for name in sorted(tf_nested.keys() - our_nested.keys()):
            if not subset:
                self.diff(where, f"missing nested message {name}")
        if not allow_extra:
            for name in sorted(our_nested.keys() - tf_nested.keys()):
                self.diff(where, f"extra nested message {name}")
        for name in sorted(our_nested.keys() & tf_nested.keys()):
            self.compare_message(our_nested[name], tf_nested[name], rename, allow_extra, subset)

        our_enums = {e.name: e for e in ours.enum_types}
        tf_enums = {e.name: e for e in tf.enum_types}
        for name in sorted(tf_enums.keys() - our_enums.keys()):
            if not subset:
                self.diff(where, f"missing nested enum {name}")
        if not allow_extra:
            for name in sorted(our_enums.keys() - tf_enums.keys()):
                self.diff(where, f"extra nested enum {name}")
        for name in sorted(our_enums.keys() & tf_enums.keys()):
            self.compare_enum(our_enums[name], tf_enums[name])

    def compare_enum(self, ours, tf) -> None:
        self.enums += 1
        where = ours.full_name
        a = {v.name: v.number for v in ours.values}
        b = {v.name: v.number for v in tf.values}
        for name in sorted(b.keys() - a.keys()):
            self.diff(where, f"missing value {name} = {b[name]}")
        for name in sorted(a.keys() - b.keys()):
            self.diff(where, f"extra value {name} = {a[name]}")
        for name in sorted(a.keys() & b.keys()):
            if a[name] != b[name]:
                self.diff(where, f"value {name}: ours {a[name]}, TensorFlow {b[name]}")
        if bool(ours.GetOptions().allow_alias) != bool(tf.GetOptions().allow_alias):
            self.diff(where, "allow_alias differs")
        our_p, tf_p = descriptor_pb2.EnumDescriptorProto(), descriptor_pb2.EnumDescriptorProto()
        ours.CopyToProto(our_p)
        tf.CopyToProto(tf_p)
        ra = (sorted((r.start, r.end) for r in our_p.reserved_range), sorted(our_p.reserved_name))
        rb = (sorted((r.start, r.end) for r in tf_p.reserved_range), sorted(tf_p.reserved_name))
        if ra != rb:
            self.diff(where, f"reserved: ours {ra!r}, TensorFlow {rb!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("descriptor_set", help="encoded FileDescriptorSet (dump_descriptors example)")
    parser.add_argument("--tf-lib", help="path of libtensorflow_framework.so.2 (default: the installed wheel's)")
    parser.add_argument("-v", "--verbose", action="store_true", help="list what was compared")
    args = parser.parse_args()

    try:
        ours_set = load_set(args.descriptor_set)
        ours = pool_from_set(ours_set)
    except Exception as err:
        print(f"proto_schema_check: cannot load {args.descriptor_set}: {err}", file=sys.stderr)
        return 2

    tf_dir = tensorflow_dir()
    failed = import_tf_pb2_modules(tf_dir)
    for line in failed:
        print(f"note: could not import {line}", file=sys.stderr)
    so_pool, so_found, so_missing = load_so_pool(tf_dir, args.tf_lib)
    for line in so_missing:
        print(f"note: not found in TensorFlow's library: {line}")
    checker = Checker([descriptor_pool.Default(), so_pool])

    tf_lacks: list[str] = []
    mirrored_files: set[str] = set()

    for file in ours_set.file:
        fd = ours.FindFileByName(file.name)
        for name, msg in fd.message_types_by_name.items():
            tf = checker.tf_message(msg.full_name)
            if tf is not None:
                checker.compare_message(msg, tf, subset=tf.file.name in REDUCED_FILES)
                mirrored_files.add(tf.file.name)
                continue
            package = fd.package
            if package in MIRRORED_PACKAGES:
                other = MIRRORED_PACKAGES[package]
                tf = checker.tf_message(f"{other}.{name}")
                if tf is not None:
                    before = checker.messages
                    checker.compare_message(
                        msg,
                        tf,
                        rename=lambda n, o=other, p=package: p + n[len(o):] if n.startswith(o + ".") else n,
                        allow_extra=True,
                    )
                    checker.mirrored += checker.messages - before
                    if args.verbose:
                        print(f"compared {msg.full_name} with {tf.full_name} (extra fields allowed)")
                    continue
            tf_lacks.append(msg.full_name)
        for name, enum in fd.enum_types_by_name.items():
            tf = checker.tf_enum(enum.full_name)
            if tf is not None:
                checker.compare_enum(enum, tf)
                mirrored_files.add(tf.file.name)
            else:
                tf_lacks.append(enum.full_name)

    # Completeness: top-level types of the TensorFlow files we mirror.
    for file_name in sorted(mirrored_files - REDUCED_FILES):
        tf_file = None
        for pool in checker.tf_pools:
            try:
                tf_file = pool.FindFileByName(file_name)
                break
            except KeyError:
                pass
        if tf_file is None:
            continue
        for name in list(tf_file.message_types_by_name) + list(tf_file.enum_types_by_name):
            full = f"{tf_file.package}.{name}" if tf_file.package else name
            try:
                ours.FindMessageTypeByName(full)
                continue
            except KeyError:
                pass
            try:
                ours.FindEnumTypeByName(full)
                continue
            except KeyError:
                pass
            checker.diff(full, f"defined in TensorFlow's {file_name} but not by us")

    if args.verbose:
        print(f"TensorFlow files compared: {len(mirrored_files)}")
        for name in sorted(mirrored_files):
            print(f"  {name}")
        if so_found:
            print("read from TensorFlow's library: " + ", ".join(so_found))
    if tf_lacks:
        print(f"only in unbound (TensorFlow lacks {len(tf_lacks)}): " + ", ".join(sorted(tf_lacks)))
    for line in checker.diffs:
        print(f"DIFF {line}")
    print(
        f"proto schema check: {checker.messages} messages, {checker.enums} enums, "
        f"{len(checker.diffs)} differences"
        + (f" ({checker.mirrored} test messages compared with TensorFlow's test data)" if checker.mirrored else "")
    )
    return 1 if checker.diffs else 0


if __name__ == "__main__":
    sys.exit(main())
