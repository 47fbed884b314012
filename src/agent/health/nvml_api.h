#pragma once

// The few NVML declarations the GPU check uses, written out here so that hpod
// builds without nvml.h and never links NVML: gpu_check.cc dlopens the library
// at run time, and fake_nvml.cc implements these same symbols. The values are
// NVML's ABI (nvml.h, stable since R450).
//
// Thread contract: declarations only.

#include <cstdint>

extern "C" {

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

typedef struct {
  nvmlDevice_t device;
  unsigned long long eventType;
  unsigned long long eventData;  // the Xid, for nvmlEventTypeXidCriticalError
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlEventData_t;

typedef nvmlReturn_t (*nvmlInit_v2_fn)(void);
typedef nvmlReturn_t (*nvmlShutdown_fn)(void);
typedef const char* (*nvmlErrorString_fn)(nvmlReturn_t);
typedef nvmlReturn_t (*nvmlDeviceGetCount_v2_fn)(unsigned int* count);
typedef nvmlReturn_t (*nvmlDeviceGetHandleByIndex_v2_fn)(unsigned int index, nvmlDevice_t* device);
// errorType 1 = NVML_MEMORY_ERROR_TYPE_UNCORRECTED, counterType 0 = NVML_VOLATILE_ECC.
typedef nvmlReturn_t (*nvmlDeviceGetTotalEccErrors_fn)(nvmlDevice_t device, int errorType,
                                                       int counterType, unsigned long long* count);
typedef nvmlReturn_t (*nvmlDeviceGetRemappedRows_fn)(nvmlDevice_t device, unsigned int* corr_rows,
                                                     unsigned int* unc_rows,
                                                     unsigned int* is_pending,
                                                     unsigned int* failure_occurred);
// sensorType 0 = NVML_TEMPERATURE_GPU.
typedef nvmlReturn_t (*nvmlDeviceGetTemperature_fn)(nvmlDevice_t device, int sensorType,
                                                    unsigned int* temp);
typedef nvmlReturn_t (*nvmlEventSetCreate_fn)(nvmlEventSet_t* set);
typedef nvmlReturn_t (*nvmlDeviceRegisterEvents_fn)(nvmlDevice_t device,
                                                    unsigned long long event_types,
                                                    nvmlEventSet_t set);
typedef nvmlReturn_t (*nvmlEventSetWait_v2_fn)(nvmlEventSet_t set, nvmlEventData_t* data,
                                               unsigned int timeout_ms);
typedef nvmlReturn_t (*nvmlEventSetFree_fn)(nvmlEventSet_t set);
// The machine's facts at join (machine_facts.cc).
typedef nvmlReturn_t (*nvmlDeviceGetName_fn)(nvmlDevice_t device, char* name, unsigned int length);
typedef nvmlReturn_t (*nvmlDeviceGetUUID_fn)(nvmlDevice_t device, char* uuid, unsigned int length);
typedef struct {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;
typedef nvmlReturn_t (*nvmlDeviceGetMemoryInfo_fn)(nvmlDevice_t device, nvmlMemory_t* memory);

}  // extern "C"

namespace hpod::agent::health::nvml {

inline constexpr nvmlReturn_t kSuccess = 0;
inline constexpr nvmlReturn_t kErrorNotSupported = 3;
inline constexpr nvmlReturn_t kErrorNotFound = 6;
inline constexpr nvmlReturn_t kErrorDriverNotLoaded = 9;
inline constexpr nvmlReturn_t kErrorTimeout = 10;
inline constexpr nvmlReturn_t kErrorLibraryNotFound = 12;
inline constexpr nvmlReturn_t kErrorGpuIsLost = 15;
inline constexpr nvmlReturn_t kErrorUnknown = 999;
inline constexpr int kMemoryErrorTypeUncorrected = 1;
inline constexpr int kVolatileEcc = 0;
inline constexpr int kTemperatureGpu = 0;
inline constexpr unsigned long long kEventTypeXidCriticalError = 0x8ULL;

}  // namespace hpod::agent::health::nvml
