/* A plugin built against TensorFlow 2.5-2.9's grappler.h, whose TP_OptimizerConfigs had no
 * auto_mixed_precision_onednn_bfloat16 field: everything after auto_mixed_precision sits 4
 * bytes earlier and struct_size is 88. It turns `remapping` off at its old offset (64, which
 * is `layout_optimizer` in today's layout). Proves the host reads the layout from the
 * struct_size the plugin writes back: it must report remapping off, not layout_optimizer. */
#include "plugin_abi.h"

typedef struct OldOptimizerConfigs { /* TF 2.5-2.9 */
  size_t struct_size;
  void *ext;
  TF_TriState disable_model_pruning;
  TF_TriState implementation_selector;
  TF_TriState function_optimization;
  TF_TriState common_subgraph_elimination;
  TF_TriState arithmetic_optimization;
  TF_TriState debug_stripper;
  TF_TriState constant_folding;
  TF_TriState shape_optimization;
  TF_TriState auto_mixed_precision;
  TF_TriState auto_mixed_precision_mkl;
  TF_TriState pin_to_host_optimization;
  TF_TriState layout_optimizer;
  TF_TriState remapping;
  TF_TriState loop_optimization;
  TF_TriState dependency_optimization;
  TF_TriState auto_parallel;
  TF_TriState memory_optimization;
  TF_TriState scoped_allocator_optimization;
} OldOptimizerConfigs;

_Static_assert(offsetof(OldOptimizerConfigs, remapping) == 64, "old layout");
_Static_assert(offsetof(OldOptimizerConfigs, scoped_allocator_optimization) + 4 == 88,
               "old layout");

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)optimizer, (void)in, (void)item, (void)out;
  TF_SetStatus(status, TF_ABORTED, "nothing to do");
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, "CPU", optimize);
  OldOptimizerConfigs *configs = (OldOptimizerConfigs *)params->optimizer_configs;
  configs->struct_size = offsetof(OldOptimizerConfigs, scoped_allocator_optimization) + 4;
  configs->remapping = TF_TriState_Off;
  TF_SetStatus(status, TF_OK, "");
}
