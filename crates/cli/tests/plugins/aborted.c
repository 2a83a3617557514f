/* optimize_func returns TF_ABORTED, TensorFlow's "did nothing". Proves the host treats it as
 * a quiet no-op: no warning, graph unchanged. */
#include "plugin_abi.h"

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)optimizer, (void)in, (void)item, (void)out;
  TF_SetStatus(status, TF_ABORTED, "nothing to do");
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, "CPU", optimize);
  TF_SetStatus(status, TF_OK, "");
}
