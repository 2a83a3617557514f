"""Split an array into the per-device components of a DTensor layout, join them back, and
move them to another layout, without TensorFlow.

usage: python dtensor_pack.py
"""

import numpy as np

import unbound


def main() -> None:
    mesh = unbound.Mesh([("x", 2), ("y", 4)])  # CPU devices 0..7
    print("mesh:", mesh)  # TensorFlow's Mesh.to_string()
    layout = unbound.Layout(["x", "y"], mesh)
    print("layout:", layout)  # TensorFlow's Layout.to_string()
    array = np.arange(8 * 12, dtype=np.float32).reshape(8, 12)
    components = unbound.pack(array, layout)  # what dtensor.unpack would return
    print(len(components), "components of shape", components[0].shape)
    assert np.array_equal(unbound.unpack(components, layout), array)
    rows = unbound.Layout(["unsharded", "y"], mesh)
    moved = unbound.relayout(components, layout, rows)
    print("after relayout to", rows.sharding_specs, "each holds", moved[0].shape)


if __name__ == "__main__":
    main()
