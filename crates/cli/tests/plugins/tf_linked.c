/* Linked like a real plugin: DT_NEEDED libtensorflow_framework.so.2 and libtensorflow_cc.so.2,
 * util symbols versioned "tensorflow" (linked against tf_stub.c, which is not on the library
 * path at run time). Proves the host's shims stand in for TensorFlow's libraries so such a
 * plugin loads unmodified, and that the util functions answer: it removes the "drop_" nodes
 * only after checking the fetch list is ["out:0"] and that no drop_ node is to be preserved. */
#include <stdio.h>

#include "plugin_abi.h"
#include "wire.h"
#include "drop_nodes.h"

/* Whether `want` is in one of the item's string lists. */
static int list_has(const TF_GrapplerItem *item, int fetch, const char *want, size_t want_n,
                    int *count, TF_Status *s) {
  size_t storage_size = 0;
  (fetch ? TF_GetFetchNodesListSize : TF_GetNodesToPreserveListSize)(item, count, &storage_size, s);
  if (TF_GetCode(s) != TF_OK) return 0;
  char **values = calloc((size_t)*count + 1, sizeof *values);
  size_t *lengths = calloc((size_t)*count + 1, sizeof *lengths);
  char *storage = malloc(storage_size + 1);
  (fetch ? TF_GetFetchNodesList : TF_GetNodesToPreserveList)(item, values, lengths, *count,
                                                             storage, storage_size, s);
  int found = 0;
  for (int i = 0; TF_GetCode(s) == TF_OK && i < *count; i++)
    found |= lengths[i] == want_n && memcmp(values[i], want, want_n) == 0;
  free(values), free(lengths), free(storage);
  return found;
}

typedef struct {
  const TF_GrapplerItem *item;
  TF_Status *s;
} drop_ctx;

static int is_drop(const wire_node *node, void *ctx) {
  drop_ctx *c = ctx;
  int count;
  return node->name.n >= 5 && memcmp(node->name.p, "drop_", 5) == 0 &&
         !list_has(c->item, 0, node->name.p, node->name.n, &count, c->s);
}

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)optimizer;
  int count = 0;
  if (!list_has(item, 1, "out:0", 5, &count, status) || count != 1) {
    char msg[96];
    snprintf(msg, sizeof msg, "tf_linked: expected the fetch list [\"out:0\"], got %d entries",
             count);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    return;
  }
  drop_ctx ctx = {item, status};
  drop_nodes(in, is_drop, &ctx, out, status);
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, "CPU", optimize);
  TF_SetStatus(status, TF_OK, "");
}
