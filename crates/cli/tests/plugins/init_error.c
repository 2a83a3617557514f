/* TF_InitGraph reports an error. Proves the host fails with the plugin's own message (TensorFlow
 * returns the init status as is). */
#include "plugin_abi.h"

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  (void)params;
  TF_SetStatus(status, TF_FAILED_PRECONDITION, "init_error: no supported hardware found");
}
