/* optimize_func returns OK with bytes that are not a GraphDef (0xff: field 31, wire type 7,
 * an invalid tag). Proves the host checks the output parses before using it and keeps the
 * original graph. */
#include <stdlib.h>
#include <string.h>

#include "plugin_abi.h"

static void free_bytes(void *data, size_t length) {
  (void)length;
  free(data);
}

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)optimizer, (void)in, (void)item;
  unsigned char *bytes = malloc(16);
  memset(bytes, 0xff, 16);
  out->data = bytes;
  out->length = 16;
  out->data_deallocator = free_bytes;
  TF_SetStatus(status, TF_OK, "");
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, "CPU", optimize);
  TF_SetStatus(status, TF_OK, "");
}
