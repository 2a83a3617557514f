/* Our own declarations of TensorFlow's pluggable graph optimizer C ABI (grappler.h,
 * tf_buffer.h, tf_status.h), written from the layouts in graph-plugin-abi.md, so the test
 * plugins build without TensorFlow. The host (`unbound optimize`) exports the functions.
 *
 * Layouts (LP64): TF_Buffer 24 bytes; TP_OptimizerConfigs struct_size 92 (TF >= 2.10);
 * TP_Optimizer 40; TP_OptimizerRegistrationParams 56. */
#ifndef UNBOUND_TEST_PLUGIN_ABI_H_
#define UNBOUND_TEST_PLUGIN_ABI_H_

#include <stddef.h>
#include <stdint.h>

#define PLUGIN_EXPORT __attribute__((visibility("default")))

typedef unsigned char TF_Bool;

typedef struct TF_Buffer {
  const void *data;
  size_t length;
  void (*data_deallocator)(void *data, size_t length);
} TF_Buffer;

typedef struct TF_Status TF_Status;

typedef enum TF_Code {
  TF_OK = 0,
  TF_CANCELLED = 1,
  TF_UNKNOWN = 2,
  TF_INVALID_ARGUMENT = 3,
  TF_DEADLINE_EXCEEDED = 4,
  TF_NOT_FOUND = 5,
  TF_ALREADY_EXISTS = 6,
  TF_PERMISSION_DENIED = 7,
  TF_RESOURCE_EXHAUSTED = 8,
  TF_FAILED_PRECONDITION = 9,
  TF_ABORTED = 10,
  TF_OUT_OF_RANGE = 11,
  TF_UNIMPLEMENTED = 12,
  TF_INTERNAL = 13,
  TF_UNAVAILABLE = 14,
  TF_DATA_LOSS = 15,
  TF_UNAUTHENTICATED = 16,
} TF_Code;

typedef enum TF_TriState {
  TF_TriState_Default = 0,
  TF_TriState_Off = 1,
  TF_TriState_On = 2,
} TF_TriState;

typedef struct TF_GrapplerItem TF_GrapplerItem;
typedef struct TF_GraphProperties TF_GraphProperties;
typedef struct TF_FunctionLibraryDefinition TF_FunctionLibraryDefinition;

typedef struct TP_OptimizerConfigs {
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
  TF_TriState auto_mixed_precision_onednn_bfloat16; /* absent before TF 2.10 */
  TF_TriState auto_mixed_precision_mkl;
  TF_TriState pin_to_host_optimization;
  TF_TriState layout_optimizer;
  TF_TriState remapping;
  TF_TriState loop_optimization;
  TF_TriState dependency_optimization;
  TF_TriState auto_parallel;
  TF_TriState memory_optimization;
  TF_TriState scoped_allocator_optimization;
} TP_OptimizerConfigs;

typedef struct TP_Optimizer {
  size_t struct_size;
  void *ext;
  void *(*create_func)(void);
  void (*optimize_func)(void *optimizer, const TF_Buffer *graph_in, const TF_GrapplerItem *item,
                        TF_Buffer *graph_out, TF_Status *status);
  void (*destroy_func)(void *optimizer);
} TP_Optimizer;

typedef struct TP_OptimizerRegistrationParams {
  size_t struct_size;
  void *ext;
  int32_t major_version;
  int32_t minor_version;
  int32_t patch_version;
  const char *device_type;
  TP_OptimizerConfigs *optimizer_configs;
  TP_Optimizer *optimizer;
} TP_OptimizerRegistrationParams;

#define TP_OPTIMIZER_CONFIGS_STRUCT_SIZE \
  (offsetof(TP_OptimizerConfigs, scoped_allocator_optimization) + sizeof(TF_TriState))
#define TP_OPTIMIZER_STRUCT_SIZE (offsetof(TP_Optimizer, destroy_func) + sizeof(void (*)(void *)))
#define TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE \
  (offsetof(TP_OptimizerRegistrationParams, optimizer) + sizeof(TP_Optimizer *))

_Static_assert(sizeof(TF_Buffer) == 24, "TF_Buffer layout");
_Static_assert(TP_OPTIMIZER_CONFIGS_STRUCT_SIZE == 92, "TP_OptimizerConfigs layout");
_Static_assert(offsetof(TP_OptimizerConfigs, remapping) == 68, "TP_OptimizerConfigs layout");
_Static_assert(TP_OPTIMIZER_STRUCT_SIZE == 40, "TP_Optimizer layout");
_Static_assert(offsetof(TP_OptimizerRegistrationParams, device_type) == 32, "params layout");
_Static_assert(TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE == 56, "params layout");

/* The plugin's entry point (the plugin exports it; TensorFlow's header no longer marks it). */
PLUGIN_EXPORT void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status);

/* Exported by the host (TensorFlow: libtensorflow_framework / libtensorflow_cc). */
extern TF_Status *TF_NewStatus(void);
extern void TF_DeleteStatus(TF_Status *s);
extern void TF_SetStatus(TF_Status *s, TF_Code code, const char *msg);
extern TF_Code TF_GetCode(const TF_Status *s);
extern const char *TF_Message(const TF_Status *s);
extern TF_Buffer *TF_NewBuffer(void);
extern void TF_DeleteBuffer(TF_Buffer *b);

extern void TF_GetNodesToPreserveListSize(const TF_GrapplerItem *item, int *num_values,
                                          size_t *storage_size, TF_Status *status);
extern void TF_GetNodesToPreserveList(const TF_GrapplerItem *item, char **values, size_t *lengths,
                                      int num_values, void *storage, size_t storage_size,
                                      TF_Status *status);
extern void TF_GetFetchNodesListSize(const TF_GrapplerItem *item, int *num_values,
                                     size_t *storage_size, TF_Status *status);
extern void TF_GetFetchNodesList(const TF_GrapplerItem *item, char **values, size_t *lengths,
                                 int num_values, void *storage, size_t storage_size,
                                 TF_Status *status);
extern TF_GraphProperties *TF_NewGraphProperties(const TF_GrapplerItem *item);
extern void TF_DeleteGraphProperties(TF_GraphProperties *graph_properties);
extern void TF_InferStatically(TF_GraphProperties *graph_properties, TF_Bool assume_valid_feeds,
                               TF_Bool aggressive_shape_inference,
                               TF_Bool include_input_tensor_values,
                               TF_Bool include_output_tensor_values, TF_Status *status);
extern void TF_GetInputPropertiesListSize(TF_GraphProperties *graph_properties, const char *name,
                                          int *num_values, TF_Status *status);
extern void TF_GetOutputPropertiesListSize(TF_GraphProperties *graph_properties, const char *name,
                                           int *num_values, TF_Status *status);
extern void TF_GetInputPropertiesList(TF_GraphProperties *graph_properties, const char *name,
                                      TF_Buffer **properties, int num_values, TF_Status *status);
extern void TF_GetOutputPropertiesList(TF_GraphProperties *graph_properties, const char *name,
                                       TF_Buffer **properties, int num_values, TF_Status *status);
extern TF_FunctionLibraryDefinition *TF_NewFunctionLibraryDefinition(const TF_Buffer *graph_buf,
                                                                     TF_Status *status);
extern void TF_DeleteFunctionLibraryDefinition(TF_FunctionLibraryDefinition *fn_lib);
extern void TF_LookUpOpDef(TF_FunctionLibraryDefinition *fn_lib, const char *name, TF_Buffer *buf,
                           TF_Status *status);

/* Fills the registration the way every fixture does: all three struct sizes, the device type
 * (a static string: the host may keep the pointer), and the optimize function. */
static inline void plugin_register(TP_OptimizerRegistrationParams *params, const char *device_type,
                                   void (*optimize)(void *, const TF_Buffer *,
                                                    const TF_GrapplerItem *, TF_Buffer *,
                                                    TF_Status *)) {
  params->struct_size = TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE;
  params->device_type = device_type;
  params->optimizer_configs->struct_size = TP_OPTIMIZER_CONFIGS_STRUCT_SIZE;
  params->optimizer->struct_size = TP_OPTIMIZER_STRUCT_SIZE;
  params->optimizer->optimize_func = optimize;
}

#endif /* UNBOUND_TEST_PLUGIN_ABI_H_ */
