/* Registers for device type "GPU" and removes the "drop_" nodes. The test model's nodes are
 * all on CPU, so (like TensorFlow) the host must not run it unless told the graph targets GPU
 * (--device-type GPU); the rewrite shows whether it ran. */
#include "plugin_abi.h"
#include "wire.h"

static int is_drop(const wire_node *node, void *ctx) {
  (void)ctx;
  return node->name.n >= 5 && memcmp(node->name.p, "drop_", 5) == 0;
}

static void free_graph(void *data, size_t length) {
  (void)length;
  free(data);
}

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)optimizer, (void)item;
  uint8_t *bytes;
  size_t len;
  long removed = wire_remove_nodes(in->data, in->length, is_drop, NULL, &bytes, &len);
  if (removed <= 0) {
    free(removed < 0 ? NULL : bytes);
    TF_SetStatus(status, TF_ABORTED, "nothing to remove");
    return;
  }
  out->data = bytes;
  out->length = len;
  out->data_deallocator = free_graph;
  TF_SetStatus(status, TF_OK, "");
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, "GPU", optimize);
  TF_SetStatus(status, TF_OK, "");
}
