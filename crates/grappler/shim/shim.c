/* An empty shared library that stands in for one of TensorFlow's libraries.
 *
 * Plugins built against TensorFlow name its libraries (libtensorflow_framework.so.2,
 * libtensorflow_cc.so.2, _pywrap_tensorflow_internal.so) as needed libraries. The host loads
 * one copy of this file per such soname before loading plugins, so the dynamic linker finds a
 * library of that name already loaded; the TF_* symbols the plugin calls then resolve to the
 * ones the host executable exports. The version node "tensorflow" (see shim.map) satisfies
 * plugins linked against libtensorflow_cc.so.2, whose symbols carry that version. */
int unbound_tensorflow_shim = 1;
