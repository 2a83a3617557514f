/* optimize_func dereferences NULL. Proves that with --isolate the host survives a crashing
 * plugin, reports the signal, and keeps the original graph. */
#include "plugin_abi.h"

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)optimizer, (void)in, (void)item, (void)out, (void)status;
  volatile int *null = NULL;
  *null = 42;
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, "CPU", optimize);
  TF_SetStatus(status, TF_OK, "");
}
