/* A graph optimizer plugin that returns its input unchanged (a malloc'd copy): the cheapest
 * possible plugin, so timing a call through the host measures the host's own work. Built by
 * examples/bench_host.rs; declares the few ABI pieces it needs itself. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const void* data;
  size_t length;
  void (*data_deallocator)(void* data, size_t length);
} Buffer;

typedef struct {
  size_t struct_size;
  void* ext;
  uint32_t toggles[19];
} Configs;

typedef struct {
  size_t struct_size;
  void* ext;
  void* (*create_func)(void);
  void (*optimize_func)(void*, const Buffer*, const void*, Buffer*, void*);
  void (*destroy_func)(void*);
} Optimizer;

typedef struct {
  size_t struct_size;
  void* ext;
  int32_t major_version, minor_version, patch_version;
  const char* device_type;
  Configs* optimizer_configs;
  Optimizer* optimizer;
} Params;

static void free_data(void* data, size_t length) { (void)length; free(data); }

static void echo(void* self, const Buffer* in, const void* item, Buffer* out, void* status) {
  (void)self; (void)item; (void)status;
  void* copy = malloc(in->length ? in->length : 1);
  memcpy(copy, in->data, in->length);
  out->data = copy;
  out->length = in->length;
  out->data_deallocator = free_data;
}

void TF_InitGraph(Params* params, void* status) {
  (void)status;
  params->struct_size = 56;
  params->device_type = "CPU";
  params->optimizer_configs->struct_size = 92;
  params->optimizer->struct_size = 40;
  params->optimizer->optimize_func = echo;
}
