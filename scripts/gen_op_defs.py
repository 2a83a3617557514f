"""Writes TensorFlow's registered OpDefs (the global op registry of the installed
TensorFlow) as one serialized tensorflow.OpList.

unbound-grappler embeds the result as its built-in table of standard OpDefs, so
TF_LookUpOpDef answers with the same bytes TensorFlow's registry holds.

    $TF_VENV/bin/python scripts/gen_op_defs.py crates/graph/data/ops-tf-2.21.0.binpb
"""
import sys

from tensorflow.core.framework import op_def_pb2
from tensorflow.python.client import pywrap_tf_session as c_api


def main(out_path):
    data = c_api.TF_GetBuffer(c_api.TF_GetAllOpList())
    ops = op_def_pb2.OpList()
    ops.ParseFromString(data)
    ops.op.sort(key=lambda op: op.name)
    with open(out_path, "wb") as f:
        f.write(ops.SerializeToString(deterministic=True))
    print(f"{len(ops.op)} ops written to {out_path}")


if __name__ == "__main__":
    main(sys.argv[1])
