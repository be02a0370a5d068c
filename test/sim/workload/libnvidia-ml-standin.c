/*
 * STAND-IN: libnvidia-ml.so.1 (NVML) for the vllm-fleet proving ground. No GPU exists here.
 *
 * Real Ray detects GPUs through NVML (ray/_private/accelerators/nvidia_gpu.py via its bundled
 * pynvml: nvmlInitWithFlags, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2,
 * nvmlDeviceGetName, nvmlShutdown). This library answers those calls like a DGX Spark's
 * driver: N devices named "NVIDIA GB10", memory info "Not Supported" (the GB10 quirk).
 *
 * N comes from /etc/sim/gpus, which the nvidia-container-runtime-hook stand-in writes into a
 * container started with `docker run --gpus ...`. Without that file the driver counts as not
 * loaded (NVML_ERROR_DRIVER_NOT_LOADED), so Ray sees 0 GPUs, as in a container started
 * without --gpus on a real host.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9

#define MAX_DEVICES 16
static struct nvmlDevice_st { unsigned int index; } devices[MAX_DEVICES];
static int initialized;
static unsigned int device_count;

static const char *gpus_file(void) {
  const char *f = getenv("SIM_GPUS_FILE");
  return (f && *f) ? f : "/etc/sim/gpus";
}

static int read_gpu_count(unsigned int *count) {
  FILE *f = fopen(gpus_file(), "r");
  if (!f) return -1;
  unsigned int n = 0;
  int ok = fscanf(f, "%u", &n);
  fclose(f);
  if (ok != 1) return -1;
  if (n > MAX_DEVICES) n = MAX_DEVICES;
  *count = n;
  return 0;
}

static nvmlReturn_t do_init(void) {
  unsigned int n;
  if (read_gpu_count(&n) != 0) return NVML_ERROR_DRIVER_NOT_LOADED;
  device_count = n;
  for (unsigned int i = 0; i < n; i++) devices[i].index = i;
  initialized = 1;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit(void) { return do_init(); }
nvmlReturn_t nvmlInit_v2(void) { return do_init(); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return do_init(); }
nvmlReturn_t nvmlShutdown(void) {
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  initialized = 0;
  return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  if (!count) return NVML_ERROR_INVALID_ARGUMENT;
  *count = device_count;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  if (!device || index >= device_count) return NVML_ERROR_INVALID_ARGUMENT;
  *device = &devices[index];
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
  return nvmlDeviceGetHandleByIndex_v2(index, device);
}

static nvmlReturn_t copy_string(const char *value, char *buf, unsigned int length) {
  if (!buf) return NVML_ERROR_INVALID_ARGUMENT;
  if (strlen(value) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
  strcpy(buf, value);
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  if (!device) return NVML_ERROR_INVALID_ARGUMENT;
  return copy_string("NVIDIA GB10", name, length);
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  if (!device || !index) return NVML_ERROR_INVALID_ARGUMENT;
  *index = device->index;
  return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
  char value[96];
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  if (!device) return NVML_ERROR_INVALID_ARGUMENT;
  snprintf(value, sizeof value, "GPU-00000000-0000-0000-0000-%012x", device->index);
  return copy_string(value, uuid, length);
}

/* GB10 has unified memory: NVML reports framebuffer memory as not supported. */
nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, void *memory) {
  (void)device; (void)memory;
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  return NVML_ERROR_NOT_SUPPORTED;
}
nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, void *memory) {
  return nvmlDeviceGetMemoryInfo(device, memory);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
  if (!initialized) return NVML_ERROR_UNINITIALIZED;
  return copy_string("580.126.09", version, length);
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version) {
  if (!version) return NVML_ERROR_INVALID_ARGUMENT;
  *version = 13000;
  return NVML_SUCCESS;
}
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
  return nvmlSystemGetCudaDriverVersion(version);
}
