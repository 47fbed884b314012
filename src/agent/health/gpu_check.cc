#include "hpod/agent/health/gpu_check.h"

#include <dlfcn.h>

#include <algorithm>

#include "hpod/api/instance_types.h"

namespace hpod::agent::health {

// NVML's entry points, from dlsym.
struct GpuCheck::Api {
  void* handle = nullptr;
  nvmlInit_v2_fn init = nullptr;
  nvmlShutdown_fn shutdown = nullptr;
  nvmlErrorString_fn error_string = nullptr;
  nvmlDeviceGetCount_v2_fn count = nullptr;
  nvmlDeviceGetHandleByIndex_v2_fn handle_by_index = nullptr;
  nvmlDeviceGetTotalEccErrors_fn ecc = nullptr;
  nvmlDeviceGetRemappedRows_fn remapped_rows = nullptr;
  nvmlDeviceGetTemperature_fn temperature = nullptr;
  nvmlEventSetCreate_fn event_set_create = nullptr;
  nvmlDeviceRegisterEvents_fn register_events = nullptr;
  nvmlEventSetWait_v2_fn event_set_wait = nullptr;
  nvmlEventSetFree_fn event_set_free = nullptr;
};

namespace {

template <typename Fn>
bool Sym(void* handle, const char* name, Fn* out) {
  *out = reinterpret_cast<Fn>(::dlsym(handle, name));
  return *out != nullptr;
}

struct Finding {
  Verdict verdict;
  std::string reason;
};

}  // namespace

GpuCheck::GpuCheck(GpuCheckOptions options) : options_(std::move(options)) {}

GpuCheck::~GpuCheck() {
  if (events_ != nullptr && api_->event_set_free) api_->event_set_free(events_);
  if (initialized_) api_->shutdown();
}

std::string GpuCheck::Error(nvmlReturn_t r) const {
  const char* s = api_ && api_->error_string ? api_->error_string(r) : nullptr;
  return (s ? std::string(s) : "NVML error") + " (" + std::to_string(r) + ")";
}

std::string GpuCheck::Load() {
  if (tried_) return load_error_;
  tried_ = true;
  // The local provider's nodes have stand-in GPUs: the host's real NVML (if any)
  // would report the host's GPUs, not the node's.
  if (options_.library == "none") {
    load_error_ = "GPU checks are turned off on this node (HPOD_NVML_LIBRARY=none)";
    return load_error_;
  }
  void* handle = ::dlopen(options_.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* e = ::dlerror();
    load_error_ = e ? e : ("cannot load " + options_.library);
    return load_error_;
  }
  api_ = std::make_unique<Api>();
  Api& a = *api_;
  a.handle = handle;
  bool ok = Sym(handle, "nvmlInit_v2", &a.init) && Sym(handle, "nvmlShutdown", &a.shutdown) &&
            Sym(handle, "nvmlErrorString", &a.error_string) &&
            Sym(handle, "nvmlDeviceGetCount_v2", &a.count) &&
            Sym(handle, "nvmlDeviceGetHandleByIndex_v2", &a.handle_by_index);
  if (!ok) {
    load_error_ = options_.library + " lacks the NVML v2 entry points";
    return load_error_;
  }
  // Optional: older drivers or GPUs lack some; the queries are then skipped.
  Sym(handle, "nvmlDeviceGetTotalEccErrors", &a.ecc);
  Sym(handle, "nvmlDeviceGetRemappedRows", &a.remapped_rows);
  Sym(handle, "nvmlDeviceGetTemperature", &a.temperature);
  Sym(handle, "nvmlEventSetCreate", &a.event_set_create);
  Sym(handle, "nvmlDeviceRegisterEvents", &a.register_events);
  Sym(handle, "nvmlEventSetWait_v2", &a.event_set_wait);
  Sym(handle, "nvmlEventSetFree", &a.event_set_free);
  nvmlReturn_t r = a.init();
  if (r == nvml::kErrorDriverNotLoaded || r == nvml::kErrorLibraryNotFound) {
    load_error_ = "the NVIDIA driver is not loaded: " + Error(r);
  } else if (r != nvml::kSuccess) {
    init_fault_ = "nvmlInit failed: " + Error(r);
  } else {
    initialized_ = true;
  }
  return load_error_;
}

Outcome GpuCheck::Run() {
  std::string type = options_.instance_type ? options_.instance_type() : "";
  if (type.empty()) return Outcome::Skipped("the node's instance type is not known yet");
  auto info = api::LookupInstanceType(type);
  if (!info) return Outcome::Skipped("unknown instance type " + type);
  const unsigned int expected = static_cast<unsigned int>(info->gpus);
  if (expected == 0) return Outcome::Skipped(type + " has no GPUs");
  if (std::string why = Load(); !why.empty()) {
    return Outcome::Skipped("NVML is missing (" + why + "): the " + std::to_string(expected) +
                            " GPUs of " + type + " are not checked");
  }
  if (!initialized_) {
    return Outcome::Fail(Verdict::kReboot, init_fault_);
  }
  Api& a = *api_;
  std::vector<Finding> findings;
  auto lost = [&](unsigned int i) {
    findings.push_back({Verdict::kReplace, "GPU " + std::to_string(i) + " is lost"});
  };
  unsigned int count = 0;
  nvmlReturn_t r = a.count(&count);
  if (r != nvml::kSuccess) {
    return Outcome::Fail(Verdict::kReboot, "nvmlDeviceGetCount failed: " + Error(r));
  }
  if (count != expected) {
    findings.push_back({Verdict::kReboot, "NVML sees " + std::to_string(count) + " GPUs; " + type +
                                              " has " + std::to_string(expected)});
  }
  std::vector<nvmlDevice_t> devices(count, nullptr);
  for (unsigned int i = 0; i < count; ++i) {
    nvmlDevice_t d = nullptr;
    r = a.handle_by_index(i, &d);
    if (r == nvml::kErrorGpuIsLost) {
      lost(i);
      continue;
    }
    if (r != nvml::kSuccess) continue;
    devices[i] = d;
    unsigned long long ecc = 0;
    if (a.ecc) {
      r = a.ecc(d, nvml::kMemoryErrorTypeUncorrected, nvml::kVolatileEcc, &ecc);
      if (r == nvml::kErrorGpuIsLost) {
        lost(i);
        continue;
      }
      if (r == nvml::kSuccess && ecc > 0) {
        findings.push_back(
            {Verdict::kReplace, "GPU " + std::to_string(i) + " has uncorrected ECC errors"});
      }
    }
    if (a.remapped_rows) {
      unsigned int corr = 0, unc = 0, pending = 0, failure = 0;
      r = a.remapped_rows(d, &corr, &unc, &pending, &failure);
      if (r == nvml::kErrorGpuIsLost) {
        lost(i);
        continue;
      }
      if (r == nvml::kSuccess && failure) {
        findings.push_back(
            {Verdict::kReplace, "GPU " + std::to_string(i) + " row remapping failed"});
      } else if (r == nvml::kSuccess && pending) {
        findings.push_back(
            {Verdict::kReboot, "GPU " + std::to_string(i) + " has row remappings pending"});
      }
    }
    if (a.temperature) {
      unsigned int temp = 0;
      r = a.temperature(d, nvml::kTemperatureGpu, &temp);
      if (r == nvml::kErrorGpuIsLost) {
        lost(i);
        continue;
      }
      if (r == nvml::kSuccess && temp >= options_.max_temperature_c) {
        findings.push_back({Verdict::kReboot, "GPU " + std::to_string(i) + " at or above " +
                                                  std::to_string(options_.max_temperature_c) +
                                                  " °C"});
      }
    }
  }
  // Xid events: one set for every device, registered once per device.
  if (a.event_set_create && a.register_events && a.event_set_wait) {
    if (events_ == nullptr && a.event_set_create(&events_) != nvml::kSuccess) events_ = nullptr;
    for (nvmlDevice_t d : devices) {
      if (events_ == nullptr || d == nullptr ||
          std::find(registered_.begin(), registered_.end(), d) != registered_.end()) {
        continue;
      }
      // NOT_SUPPORTED on some GPUs: nothing to poll there; not asked again.
      a.register_events(d, nvml::kEventTypeXidCriticalError, events_);
      registered_.push_back(d);
    }
    for (int n = 0; events_ != nullptr && n < 256; ++n) {
      nvmlEventData_t e{};
      if (a.event_set_wait(events_, &e, 0) != nvml::kSuccess) break;  // TIMEOUT: none left
      if (!(e.eventType & nvml::kEventTypeXidCriticalError)) continue;
      auto at = std::find(devices.begin(), devices.end(), e.device);
      std::string where =
          at == devices.end() ? "a GPU" : "GPU " + std::to_string(at - devices.begin());
      xids_.Add({static_cast<int>(e.eventData), where});
    }
  }
  Outcome xid = xids_.Judge();
  if (xid.result == Result::kFail) findings.push_back({xid.verdict, xid.reason});
  if (findings.empty()) return Outcome::Ok();
  Verdict worst = Verdict::kHealthy;
  std::string reason;
  for (const auto& f : findings) {
    worst = std::max(worst, f.verdict);
    reason += (reason.empty() ? "" : "; ") + f.reason;
  }
  return Outcome::Fail(worst, reason);
}

}  // namespace hpod::agent::health
