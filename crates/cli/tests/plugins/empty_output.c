/* optimize_func returns OK but never fills the output buffer. TensorFlow would parse that as
 * an empty GraphDef and lose the whole graph; proves the host refuses it (warning "empty")
 * and keeps the original graph. */
#include "plugin_abi.h"

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)optimizer, (void)in, (void)item, (void)out;
  TF_SetStatus(status, TF_OK, "");
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, "CPU", optimize);
  TF_SetStatus(status, TF_OK, "");
}
