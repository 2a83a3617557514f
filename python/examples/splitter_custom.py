"""A Splitter of your own, as the proto splitter guide describes: a `GraphDef` whose large
constants' `tensor_content` go to chunks of their own, written as `PREFIX.cpb`, read back with
`unbound.Merger` (and readable by TensorFlow's C++ Merger). Needs TensorFlow for `graph_pb2`.

usage: python splitter_custom.py FROZEN_GRAPH.pb OUT_PREFIX
"""

import sys

from tensorflow.core.framework import graph_pb2

import unbound


class ConstantSplitter(unbound.Splitter):
    """Moves the tensor bytes of every `Const` node larger than `threshold` into a chunk."""

    threshold = 64

    def build_chunks(self) -> None:
        for i, node in enumerate(self._proto.node):
            if node.op != "Const":  # (reading node.attr["value"] would add an entry)
                continue
            tensor = node.attr["value"].tensor
            if len(tensor.tensor_content) > self.threshold:
                self.add_chunk(tensor.tensor_content, ["node", i, "attr", "value", "tensor", "tensor_content"])
                tensor.ClearField("tensor_content")


def main() -> None:
    graph = graph_pb2.GraphDef.FromString(open(sys.argv[1], "rb").read())
    original = graph_pb2.GraphDef()
    original.CopyFrom(graph)

    path = ConstantSplitter(graph).write(sys.argv[2])
    chunks = unbound.inspect(path).chunks if path.endswith(".cpb") else []
    print(f"wrote {path} ({len(chunks)} chunks)")

    back = graph_pb2.GraphDef()
    unbound.Merger.read(sys.argv[2], back)
    print("read back equal to the original:", back == original)


if __name__ == "__main__":
    main()
