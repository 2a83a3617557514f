/* optimize_func never returns. Proves that with --isolate --plugin-timeout the host gives up
 * on the plugin, reports the timeout, and keeps the original graph. */
#include <unistd.h>

#include "plugin_abi.h"

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)optimizer, (void)in, (void)item, (void)out, (void)status;
  for (;;) sleep(1000);
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, "CPU", optimize);
  TF_SetStatus(status, TF_OK, "");
}
