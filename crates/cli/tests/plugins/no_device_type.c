/* Registers an optimize_func but no device type. Proves the host applies TensorFlow's check
 * with its exact message ("'device_type' field in TP_OptimizerRegistrationParams must be
 * set.") and fails. */
#include "plugin_abi.h"

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)optimizer, (void)in, (void)item, (void)out;
  TF_SetStatus(status, TF_ABORTED, "");
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, NULL, optimize);
  TF_SetStatus(status, TF_OK, "");
}
