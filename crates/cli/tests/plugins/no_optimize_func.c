/* Registers a device type but no optimize_func. Proves the host applies TensorFlow's check
 * with its exact message ("'optimize_func' field in TP_Optimizer must be set.") and fails. */
#include "plugin_abi.h"

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, "CPU", NULL);
  TF_SetStatus(status, TF_OK, "");
}
