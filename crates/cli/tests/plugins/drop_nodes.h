/* The output step of the test plugins that remove nodes. Include after the header that
 * declares TF_Buffer and TF_Status (plugin_abi.h, or TensorFlow's grappler.h) and wire.h. */
#ifndef UNBOUND_TEST_DROP_NODES_H
#define UNBOUND_TEST_DROP_NODES_H

static void drop_nodes_free(void *data, size_t length) {
  (void)length;
  free(data);
}

/* Sets `out` to the graph `in` without the nodes `drop(node, ctx)` selects (see
 * wire_remove_nodes) and the status to OK; the host frees the graph through the deallocator.
 * ABORTED ("nothing to remove") when no node is selected, INVALID_ARGUMENT when `in` is not a
 * GraphDef. */
static void drop_nodes(const TF_Buffer *in, int (*drop)(const wire_node *node, void *ctx),
                       void *ctx, TF_Buffer *out, TF_Status *status) {
  uint8_t *bytes;
  size_t len;
  long removed = wire_remove_nodes(in->data, in->length, drop, ctx, &bytes, &len);
  if (removed < 0) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "the input is not a GraphDef");
    return;
  }
  if (removed == 0) {
    free(bytes);
    TF_SetStatus(status, TF_ABORTED, "nothing to remove");
    return;
  }
  out->data = bytes;
  out->length = len;
  out->data_deallocator = drop_nodes_free;
  TF_SetStatus(status, TF_OK, "");
}

#endif
