/* Link-time stand-ins for TensorFlow's libraries, used only to link tf_linked.c the way real
 * plugins are linked (see build_tf_linked_plugin in tests/common/plugins.rs). Built twice:
 * as libtensorflow_framework.so.2 (unversioned symbols, like TensorFlow's) and, with
 * tf_stub.map, as libtensorflow_cc.so.2 (symbols versioned "tensorflow", like TensorFlow's).
 * Never loaded: at run time the host's shims and exports must supply these. Every body aborts
 * so a plugin that somehow bound to a stub fails loudly. */
#include <stdlib.h>

#include "plugin_abi.h"

#define STUB(ret, name, ...) \
  ret name(__VA_ARGS__) { abort(); }

#ifdef TF_STUB_FRAMEWORK
STUB(TF_Status *, TF_NewStatus, void)
STUB(void, TF_DeleteStatus, TF_Status *s)
STUB(void, TF_SetStatus, TF_Status *s, TF_Code code, const char *msg)
STUB(TF_Code, TF_GetCode, const TF_Status *s)
STUB(const char *, TF_Message, const TF_Status *s)
#else
STUB(void, TF_GetNodesToPreserveListSize, const TF_GrapplerItem *item, int *n, size_t *size,
     TF_Status *s)
STUB(void, TF_GetNodesToPreserveList, const TF_GrapplerItem *item, char **values,
     size_t *lengths, int n, void *storage, size_t size, TF_Status *s)
STUB(void, TF_GetFetchNodesListSize, const TF_GrapplerItem *item, int *n, size_t *size,
     TF_Status *s)
STUB(void, TF_GetFetchNodesList, const TF_GrapplerItem *item, char **values, size_t *lengths,
     int n, void *storage, size_t size, TF_Status *s)
#endif
