"""Save a model in TensorFlow's image format (saved_model.cpb) and load it back, with
open-source TensorFlow and unbound.

usage: python tensorflow_save_load.py [OUT_DIR]
"""

import sys
import tempfile

import numpy as np
import tensorflow as tf

import unbound.tensorflow


class Model(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(tf.random.normal([8, 3], seed=1))

    @tf.function(input_signature=[tf.TensorSpec([None, 8], tf.float32)])
    def __call__(self, x):
        return {"y": tf.matmul(x, self.w)}


out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp() + "/model"
model = Model()

# One call patches this process's TensorFlow: the image format works as its docs say.
unbound.tensorflow.enable_image_format()
unbound.tensorflow.set_max_size(4096)  # small, so that this tiny model really is chunked
tf.saved_model.save(
    model, out, options=tf.saved_model.SaveOptions(experimental_image_format=True)
)
loaded = tf.saved_model.load(out)

x = np.ones([2, 8], np.float32)
same = np.array_equal(loaded.signatures["serving_default"](x=x)["y"], model(x)["y"])
print(f"wrote {out}/saved_model.cpb; outputs equal: {same}")
