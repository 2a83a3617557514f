/* A graph optimizer plugin written against TensorFlow 2.21's own grappler.h that records what
 * its host tells it, so the same plugin binary can be run by TensorFlow and by
 * `unbound optimize` and the two answers compared (probe_check.py).
 *
 * Registers for device type "CPU". Each optimize_func call appends one JSON object (one line)
 * to the file named by $UNBOUND_PROBE_DUMP:
 *   nodes, node_names, has_addn       which graph this is
 *   preserve, fetch                   TF_GetNodesToPreserveList / TF_GetFetchNodesList
 *   probe_node                        $UNBOUND_PROBE_NODE, else the first AddN node
 *   inputs, outputs                   its properties after TF_InferStatically(props, 1, 0, 0, 0):
 *                                     each serialized OpInfo.TensorProperties, in hex
 *   unknown_node_inputs               the input-property count for a node that does not exist
 *   add_opdef                         TF_LookUpOpDef("Add") on TF_NewFunctionLibraryDefinition
 *                                     of the input graph, in hex
 *   missing_opdef                     TF_LookUpOpDef of an op that does not exist
 *   status                            {call: [code, message]} for every util call
 *   removed                           nodes removed (see below)
 * Then, if $UNBOUND_PROBE_REMOVE names a node with a data input, removes it and rewires its
 * consumers to that input (a visible rewrite of an Identity); otherwise returns TF_ABORTED.
 *
 * Build: gcc -shared -fPIC -I$TF/include -I<repo>/crates/cli/tests/plugins probe_plugin.c
 *        -L$TF -l:libtensorflow_framework.so.2 -l:libtensorflow_cc.so.2 -Wl,-rpath,$TF */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tensorflow/c/experimental/grappler/grappler.h"
#include "wire.h" /* crates/cli/tests/plugins/wire.h: GraphDef node listing and node removal */

/* ---- JSON output into a memory stream ---- */

static void json_str(FILE *f, const char *s, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20 || c >= 0x7f) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

static void json_cstr(FILE *f, const char *s) { json_str(f, s, strlen(s)); }

static void json_hex(FILE *f, const void *data, size_t n) {
  fputc('"', f);
  for (size_t i = 0; i < n; i++) fprintf(f, "%02x", ((const unsigned char *)data)[i]);
  fputc('"', f);
}

/* Statuses are collected as `"call": [code, "message"]` pairs into their own stream. */
static void note_status(FILE *statuses, const char *call, TF_Status *s) {
  if (ftell(statuses) > 1) fputc(',', statuses);
  json_cstr(statuses, call);
  fprintf(statuses, ":[%d,", (int)TF_GetCode(s));
  json_cstr(statuses, TF_Message(s));
  fputc(']', statuses);
}

/* ---- util calls ---- */

typedef void (*list_size_fn)(const TF_GrapplerItem *, int *, size_t *, TF_Status *);
typedef void (*list_fn)(const TF_GrapplerItem *, char **, size_t *, int, void *, size_t,
                        TF_Status *);

/* Writes `"key": [names...]` from one of the two string-list calls. */
static void dump_list(FILE *f, FILE *statuses, const char *key, const TF_GrapplerItem *item,
                      list_size_fn size_fn, list_fn fn, TF_Status *s) {
  int num = 0;
  size_t storage_size = 0;
  char call[64];
  size_fn(item, &num, &storage_size, s);
  snprintf(call, sizeof call, "%s_size", key);
  note_status(statuses, call, s);
  fprintf(f, ",\"%s\":[", key);
  if (TF_GetCode(s) == TF_OK && num >= 0) {
    char **values = calloc((size_t)num + 1, sizeof *values);
    size_t *lengths = calloc((size_t)num + 1, sizeof *lengths);
    void *storage = malloc(storage_size + 1);
    fn(item, values, lengths, num, storage, storage_size, s);
    note_status(statuses, key, s);
    for (int i = 0; TF_GetCode(s) == TF_OK && i < num; i++) {
      if (i) fputc(',', f);
      json_str(f, values[i], lengths[i]);
    }
    free(values), free(lengths), free(storage);
  }
  fputc(']', f);
}

typedef void (*props_size_fn)(TF_GraphProperties *, const char *, int *, TF_Status *);
typedef void (*props_fn)(TF_GraphProperties *, const char *, TF_Buffer **, int, TF_Status *);

/* Writes `"key": [hex...]`: each property in a fresh TF_NewBuffer, as TensorFlow requires. */
static void dump_props(FILE *f, FILE *statuses, const char *key, TF_GraphProperties *props,
                       const char *node, props_size_fn size_fn, props_fn fn, TF_Status *s) {
  int num = 0;
  char call[64];
  size_fn(props, node, &num, s);
  snprintf(call, sizeof call, "%s_size", key);
  note_status(statuses, call, s);
  fprintf(f, ",\"%s\":[", key);
  if (TF_GetCode(s) == TF_OK && num > 0) {
    TF_Buffer **bufs = calloc((size_t)num, sizeof *bufs);
    for (int i = 0; i < num; i++) bufs[i] = TF_NewBuffer();
    fn(props, node, bufs, num, s);
    note_status(statuses, key, s);
    for (int i = 0; i < num; i++) {
      if (i) fputc(',', f);
      json_hex(f, bufs[i]->data, bufs[i]->length);
      TF_DeleteBuffer(bufs[i]);
    }
    free(bufs);
  }
  fputc(']', f);
}

/* ---- the optimizer ---- */

static int is_requested(const wire_node *node, void *ctx) {
  const char *name = ctx;
  return wire_str_eq(node->name, name, strlen(name));
}

static void free_graph(void *data, size_t length) {
  (void)length;
  free(data);
}

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)optimizer;
  char *text = NULL, *status_text = NULL;
  size_t text_len = 0, status_len = 0;
  FILE *f = open_memstream(&text, &text_len);
  FILE *statuses = open_memstream(&status_text, &status_len);
  fputc('{', statuses);
  TF_Status *s = TF_NewStatus();

  wire_node *nodes = NULL;
  long count = wire_graph_nodes(in->data, in->length, &nodes);
  const char *probe = getenv("UNBOUND_PROBE_NODE");
  char *addn = NULL;
  fprintf(f, "{\"nodes\":%ld,\"node_names\":[", count);
  for (long i = 0; i < count; i++) {
    if (i) fputc(',', f);
    json_str(f, nodes[i].name.p, nodes[i].name.n);
    if (!addn && wire_str_eq(nodes[i].op, "AddN", 4))
      addn = strndup(nodes[i].name.p, nodes[i].name.n);
  }
  fprintf(f, "],\"has_addn\":%s", addn ? "true" : "false");
  if (!probe) probe = addn;

  dump_list(f, statuses, "preserve", item, TF_GetNodesToPreserveListSize,
            TF_GetNodesToPreserveList, s);
  dump_list(f, statuses, "fetch", item, TF_GetFetchNodesListSize, TF_GetFetchNodesList, s);

  fprintf(f, ",\"probe_node\":");
  if (probe) json_cstr(f, probe);
  else fprintf(f, "null");
  TF_GraphProperties *props = TF_NewGraphProperties(item);
  TF_InferStatically(props, 1, 0, 0, 0, s);
  note_status(statuses, "infer_statically", s);
  if (probe) {
    dump_props(f, statuses, "inputs", props, probe, TF_GetInputPropertiesListSize,
               TF_GetInputPropertiesList, s);
    dump_props(f, statuses, "outputs", props, probe, TF_GetOutputPropertiesListSize,
               TF_GetOutputPropertiesList, s);
  }
  int unknown = -1;
  TF_GetInputPropertiesListSize(props, "unbound_probe_no_such_node", &unknown, s);
  note_status(statuses, "unknown_node_inputs_size", s);
  fprintf(f, ",\"unknown_node_inputs\":%d", unknown);
  TF_DeleteGraphProperties(props);

  TF_FunctionLibraryDefinition *flib = TF_NewFunctionLibraryDefinition(in, s);
  note_status(statuses, "new_function_library", s);
  if (flib) {
    TF_Buffer *opdef = TF_NewBuffer();
    TF_LookUpOpDef(flib, "Add", opdef, s);
    note_status(statuses, "lookup_add", s);
    fprintf(f, ",\"add_opdef\":");
    json_hex(f, opdef->data, opdef->length);
    TF_DeleteBuffer(opdef);
    TF_Buffer *missing = TF_NewBuffer();
    TF_LookUpOpDef(flib, "UnboundProbeNoSuchOp", missing, s);
    note_status(statuses, "lookup_missing", s);
    fprintf(f, ",\"missing_opdef_length\":%zu", missing->length);
    TF_DeleteBuffer(missing);
    TF_DeleteFunctionLibraryDefinition(flib);
  }

  /* The rewrite. */
  const char *remove = getenv("UNBOUND_PROBE_REMOVE");
  long removed = 0;
  if (remove && count > 0) {
    uint8_t *bytes;
    size_t len;
    removed = wire_remove_nodes(in->data, in->length, is_requested, (void *)remove, &bytes, &len);
    if (removed > 0) {
      out->data = bytes;
      out->length = len;
      out->data_deallocator = free_graph;
    } else if (removed == 0) {
      free(bytes);
    }
  }
  fprintf(f, ",\"removed\":%ld", removed);
  if (removed > 0) TF_SetStatus(status, TF_OK, "");
  else TF_SetStatus(status, TF_ABORTED, "unbound probe: nothing to remove");

  fputc('}', statuses);
  fclose(statuses);
  fprintf(f, ",\"status\":%s}\n", status_text);
  fclose(f);
  const char *dump = getenv("UNBOUND_PROBE_DUMP");
  FILE *d = dump ? fopen(dump, "a") : NULL;
  if (d) {
    fwrite(text, 1, text_len, d);
    fclose(d);
  }
  free(text), free(status_text), free(nodes), free(addn);
  TF_DeleteStatus(s);
}

__attribute__((visibility("default"))) void TF_InitGraph(TP_OptimizerRegistrationParams *params,
                                                         TF_Status *status) {
  params->struct_size = TP_OPTIMIZER_REGISTRATION_PARAMS_STRUCT_SIZE;
  params->device_type = "CPU";
  params->optimizer_configs->struct_size = TP_OPTIMIZER_CONFIGS_STRUCT_SIZE;
  params->optimizer->struct_size = TP_OPTIMIZER_STRUCT_SIZE;
  params->optimizer->optimize_func = optimize;
  TF_SetStatus(status, TF_OK, "");
}
