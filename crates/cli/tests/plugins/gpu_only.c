/* identity_remover.c registered for device type "GPU". The test model's nodes are all on CPU,
 * so (like TensorFlow) the host must not run it unless told the graph targets GPU
 * (--device-type GPU); the rewrite shows whether it ran. */
#define DEVICE_TYPE "GPU"
#include "identity_remover.c"
