"""Writes a FileDescriptorSet for the probe's custom message unbound.test.M.

usage: <tf-venv>/bin/python interop/probe/make_custom_fds.py OUT.bin

    message M {
      map<int64, string> m64 = 1;  map<bool, M> mb = 2;  repeated string rs = 3;
      string s = 4;  M child = 5;  repeated M rm = 6;
    }
"""
import sys
from google.protobuf import descriptor_pb2 as d
fds = d.FileDescriptorSet()
f = fds.file.add(); f.name = "unbound_test/m.proto"; f.package = "unbound.test"; f.syntax = "proto3"
m = f.message_type.add(); m.name = "M"
F = d.FieldDescriptorProto
def field(msg, name, num, typ, label=F.LABEL_OPTIONAL, type_name=None):
    x = msg.field.add(); x.name = name; x.number = num; x.type = typ; x.label = label
    if type_name: x.type_name = type_name
def entry(name, ktype, vtype, vname=None):
    e = m.nested_type.add(); e.name = name; e.options.map_entry = True
    field(e, "key", 1, ktype); field(e, "value", 2, vtype, type_name=vname)
entry("M64Entry", F.TYPE_INT64, F.TYPE_STRING)
entry("MbEntry", F.TYPE_BOOL, F.TYPE_MESSAGE, ".unbound.test.M")
field(m, "m64", 1, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".unbound.test.M.M64Entry")
field(m, "mb", 2, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".unbound.test.M.MbEntry")
field(m, "rs", 3, F.TYPE_STRING, F.LABEL_REPEATED)
field(m, "s", 4, F.TYPE_STRING)
field(m, "child", 5, F.TYPE_MESSAGE, type_name=".unbound.test.M")
field(m, "rm", 6, F.TYPE_MESSAGE, F.LABEL_REPEATED, ".unbound.test.M")
open(sys.argv[1], "wb").write(fds.SerializeToString())
