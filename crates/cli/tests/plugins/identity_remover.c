/* Removes every node whose name starts with "drop_" (Identity nodes in the test model),
 * rewiring its consumers to its input. Proves a successful rewrite reaches the saved output:
 * the graph comes back through the host, is parsed, and replaces the original. Returns
 * TF_ABORTED ("nothing to do") when no such node is left. Registers for DEVICE_TYPE ("CPU"
 * unless the including file says otherwise, as gpu_only.c does). */
#include "plugin_abi.h"
#include "wire.h"
#include "drop_nodes.h"

#ifndef DEVICE_TYPE
#define DEVICE_TYPE "CPU"
#endif

static int is_drop(const wire_node *node, void *ctx) {
  (void)ctx;
  return node->name.n >= 5 && memcmp(node->name.p, "drop_", 5) == 0;
}

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)optimizer, (void)item;
  drop_nodes(in, is_drop, NULL, out, status);
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, DEVICE_TYPE, optimize);
  TF_SetStatus(status, TF_OK, "");
}
