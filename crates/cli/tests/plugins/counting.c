/* Records every create / optimize / output-deallocation / destroy as one line appended to the
 * file named by UNBOUND_COUNT_FILE (a file, so it also works when the host runs plugins in a
 * child process). optimize returns a copy of its input with a recording deallocator. Proves
 * the host pairs create with destroy, passes create's handle to optimize and destroy, and
 * releases every output through the plugin's own deallocator exactly once. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin_abi.h"

static const char MAGIC[] = "counting-optimizer";

static void record(const char *event) {
  const char *path = getenv("UNBOUND_COUNT_FILE");
  if (!path) return;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd < 0) return;
  char line[64];
  size_t n = strlen(event);
  memcpy(line, event, n);
  line[n] = '\n';
  (void)!write(fd, line, n + 1); /* one write per line: appends do not interleave */
  close(fd);
}

static void *create(void) {
  record("create");
  char *handle = malloc(sizeof MAGIC);
  memcpy(handle, MAGIC, sizeof MAGIC);
  return handle;
}

static void destroy(void *optimizer) {
  record(optimizer && strcmp(optimizer, MAGIC) == 0 ? "destroy" : "destroy-bad-handle");
  free(optimizer);
}

static void dealloc(void *data, size_t length) {
  (void)length;
  record("dealloc");
  free(data);
}

static void optimize(void *optimizer, const TF_Buffer *in, const TF_GrapplerItem *item,
                     TF_Buffer *out, TF_Status *status) {
  (void)item;
  record(optimizer && strcmp(optimizer, MAGIC) == 0 ? "optimize" : "optimize-bad-handle");
  void *copy = malloc(in->length ? in->length : 1);
  memcpy(copy, in->data, in->length);
  out->data = copy;
  out->length = in->length;
  out->data_deallocator = dealloc;
  TF_SetStatus(status, TF_OK, "");
}

void TF_InitGraph(TP_OptimizerRegistrationParams *params, TF_Status *status) {
  plugin_register(params, "CPU", optimize);
  params->optimizer->create_func = create;
  params->optimizer->destroy_func = destroy;
  TF_SetStatus(status, TF_OK, "");
}
