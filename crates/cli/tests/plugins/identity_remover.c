/* Removes every node whose name starts with "drop_" (Identity nodes in the test model),
 * rewiring its consumers to its input. Proves a successful rewrite reaches the saved output:
 * the graph comes back through the host, is parsed, and replaces the original. Returns
 * TF_ABORTED ("nothing to do") when no such node is left. */
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
  if (removed < 0) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "identity_remover: input is not a GraphDef");
    return;
  }
  if (removed == 0) {
    free(bytes);
    TF_SetStatus(status, TF_ABORTED, "nothing to remove");
    return;
  }
  out->data = bytes;
  out->length = len;
  out->data_deallocator = free_graph;
  TF_SetStatus(status, TF_OK, "");
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, "CPU", optimize);
  TF_SetStatus(status, TF_OK, "");
}
