// libhpod_fake_nvml.so: an NVML with scripted faults, for the GPU check's tests
// and for fault injection on nodes without GPUs. Point the agent at it with
// HPOD_NVML_LIBRARY=<path>/libhpod_fake_nvml.so and write the script to the file
// named by HPOD_FAKE_NVML_SCRIPT; every call re-reads it, so a fault is injected
// live by rewriting the file (write a temp file and rename it over the script):
//
//   {"devices": 8,                 GPUs (absent: 8; no script file: 8, no faults)
//    "lost": [3],                  these answer NVML_ERROR_GPU_IS_LOST to every query
//    "ecc_uncorrected": {"0": 1},  volatile uncorrected ECC count per GPU
//    "remapped_pending": [1],      row remapping pending
//    "remap_failure": [2],         row remapping failed
//    "temperature": {"0": 95},     °C per GPU (absent: 40)
//    "xids": [74],                 delivered once each per nvmlInit (so per agent
//                                  process), on GPU 0, by nvmlEventSetWait_v2
//    "init_error": 9}              nvmlInit_v2's return (absent: 0, success)
//
// Only the entry points of nvml_api.h exist. C ABI; nothing escapes as an
// exception (a script that is not valid JSON reads as no script).
//
// Thread contract: every entry point is thread-safe (one process-wide mutex).

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "hpod/agent/health/nvml_api.h"

namespace {

namespace nvml = hpod::agent::health::nvml;
using Json = nlohmann::json;

std::mutex mu;
bool initialized = false;
size_t xids_delivered = 0;
int event_set_token = 0;  // its address is the one event set

Json Script() {
  const char* path = std::getenv("HPOD_FAKE_NVML_SCRIPT");
  if (path == nullptr) return Json::object();
  std::ifstream in(path);
  if (!in) return Json::object();
  std::stringstream text;
  text << in.rdbuf();
  Json j = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  return j.is_object() ? j : Json::object();
}

unsigned int Devices(const Json& s) {
  auto it = s.find("devices");
  return it != s.end() && it->is_number_unsigned() ? it->get<unsigned int>() : 8;
}

bool Listed(const Json& s, const char* key, unsigned int i) {
  auto it = s.find(key);
  if (it == s.end() || !it->is_array()) return false;
  for (const auto& v : *it) {
    if (v.is_number_integer() && v.get<int64_t>() == static_cast<int64_t>(i)) return true;
  }
  return false;
}

int64_t PerDevice(const Json& s, const char* key, unsigned int i, int64_t absent) {
  auto it = s.find(key);
  if (it == s.end() || !it->is_object()) return absent;
  auto v = it->find(std::to_string(i));
  return v != it->end() && v->is_number_integer() ? v->get<int64_t>() : absent;
}

// The device's index, or -1 for a handle this library did not hand out.
int64_t Index(nvmlDevice_t d, const Json& s) {
  auto i = static_cast<int64_t>(reinterpret_cast<uintptr_t>(d)) - 1;
  return i >= 0 && i < static_cast<int64_t>(Devices(s)) ? i : -1;
}

// Common checks of a per-device query: initialized, a known handle, not lost.
nvmlReturn_t Query(nvmlDevice_t d, const Json& s, unsigned int* index) {
  if (!initialized) return 1;  // NVML_ERROR_UNINITIALIZED
  int64_t i = Index(d, s);
  if (i < 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  if (Listed(s, "lost", static_cast<unsigned int>(i))) return nvml::kErrorGpuIsLost;
  *index = static_cast<unsigned int>(i);
  return nvml::kSuccess;
}

template <typename F>
nvmlReturn_t Guarded(F f) {
  try {
    std::lock_guard<std::mutex> lock(mu);
    return f(Script());
  } catch (...) {
    return nvml::kErrorUnknown;
  }
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2(void) {
  return Guarded([](const Json& s) -> nvmlReturn_t {
    auto it = s.find("init_error");
    int err = it != s.end() && it->is_number_integer() ? it->get<int>() : 0;
    if (err == 0) {
      initialized = true;
      xids_delivered = 0;  // each NVML session (agent process) gets the script's Xids
    }
    return err;
  });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown(void) {
  std::lock_guard<std::mutex> lock(mu);
  initialized = false;
  return nvml::kSuccess;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case 0:
      return "Success";
    case 1:
      return "Uninitialized";
    case 2:
      return "Invalid Argument";
    case nvml::kErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case nvml::kErrorTimeout:
      return "Timeout";
    case nvml::kErrorGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  return Guarded([&](const Json& s) -> nvmlReturn_t {
    if (!initialized) return 1;
    *count = Devices(s);
    return nvml::kSuccess;
  });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(
    unsigned int index, nvmlDevice_t* device) {
  return Guarded([&](const Json& s) -> nvmlReturn_t {
    if (!initialized) return 1;
    if (index >= Devices(s)) return 2;
    if (Listed(s, "lost", index)) return nvml::kErrorGpuIsLost;
    *device = reinterpret_cast<nvmlDevice_t>(static_cast<uintptr_t>(index) + 1);
    return nvml::kSuccess;
  });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTotalEccErrors(
    nvmlDevice_t device, int error_type, int counter_type, unsigned long long* count) {
  return Guarded([&](const Json& s) -> nvmlReturn_t {
    unsigned int i = 0;
    if (nvmlReturn_t r = Query(device, s, &i); r != nvml::kSuccess) return r;
    bool scripted =
        error_type == nvml::kMemoryErrorTypeUncorrected && counter_type == nvml::kVolatileEcc;
    *count = scripted ? static_cast<unsigned long long>(PerDevice(s, "ecc_uncorrected", i, 0)) : 0;
    return nvml::kSuccess;
  });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetRemappedRows(
    nvmlDevice_t device, unsigned int* corr_rows, unsigned int* unc_rows, unsigned int* is_pending,
    unsigned int* failure_occurred) {
  return Guarded([&](const Json& s) -> nvmlReturn_t {
    unsigned int i = 0;
    if (nvmlReturn_t r = Query(device, s, &i); r != nvml::kSuccess) return r;
    *corr_rows = 0;
    *unc_rows = 0;
    *is_pending = Listed(s, "remapped_pending", i) ? 1 : 0;
    *failure_occurred = Listed(s, "remap_failure", i) ? 1 : 0;
    return nvml::kSuccess;
  });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                                             int sensor_type,
                                                                             unsigned int* temp) {
  return Guarded([&](const Json& s) -> nvmlReturn_t {
    unsigned int i = 0;
    if (nvmlReturn_t r = Query(device, s, &i); r != nvml::kSuccess) return r;
    *temp = static_cast<unsigned int>(PerDevice(s, "temperature", i, 40));
    return nvml::kSuccess;
  });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
  std::lock_guard<std::mutex> lock(mu);
  if (!initialized) return 1;
  *set = reinterpret_cast<nvmlEventSet_t>(&event_set_token);
  return nvml::kSuccess;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceRegisterEvents(
    nvmlDevice_t device, unsigned long long event_types, nvmlEventSet_t set) {
  return Guarded([&](const Json& s) -> nvmlReturn_t {
    unsigned int i = 0;
    return Query(device, s, &i);
  });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set,
                                                                        nvmlEventData_t* data,
                                                                        unsigned int timeout_ms) {
  return Guarded([&](const Json& s) -> nvmlReturn_t {
    if (!initialized) return 1;
    auto it = s.find("xids");
    if (it == s.end() || !it->is_array() || xids_delivered >= it->size()) {
      return nvml::kErrorTimeout;  // never blocks: tests poll with timeout 0
    }
    const Json& xid = (*it)[xids_delivered++];
    *data = nvmlEventData_t{};
    data->device = reinterpret_cast<nvmlDevice_t>(uintptr_t{1});
    data->eventType = nvml::kEventTypeXidCriticalError;
    data->eventData = xid.is_number_integer() ? xid.get<unsigned long long>() : 0;
    return nvml::kSuccess;
  });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
  return nvml::kSuccess;
}

}  // extern "C"
