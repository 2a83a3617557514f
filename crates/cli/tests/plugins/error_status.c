/* optimize_func fails with TF_INVALID_ARGUMENT. Proves a plugin error is a warning naming the
 * plugin and its message, and that the graph is kept as it was (TensorFlow logs the error and
 * restores the previous graph). */
#include "plugin_abi.h"

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)optimizer, (void)in, (void)item, (void)out;
  TF_SetStatus(status, TF_INVALID_ARGUMENT, "plugin refused the graph");
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, "CPU", optimize);
  TF_SetStatus(status, TF_OK, "");
}
