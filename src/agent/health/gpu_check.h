#pragma once

// "gpu": the node's NVIDIA GPUs through NVML, loaded at run time with dlopen
// (never linked: nodes without GPUs, and hosts without a driver, run the same
// agent). Each run, against the GPU count of the node's instance type
// (api/instance_types.h):
//  - instance type not known yet, or one without GPUs → "skipped";
//  - NVML not loadable, or no driver → "skipped" with the reason: a local node of
//    a GPU type on a host without GPUs must not be rebooted forever;
//  - device count ≠ the type's → Reboot (HyperPod §13);
//  - a GPU lost (NVML_ERROR_GPU_IS_LOST on any query) → Replace;
//  - uncorrected volatile ECC errors > 0 → Replace;
//  - row remapping pending → Reboot; remapping failed → Replace;
//  - temperature ≥ max_temperature_c → Reboot;
//  - Xids from NVML's event API (polled without waiting) → JudgeXid, kept until
//    the agent restarts.
// The verdict is the worst finding; the reason lists them all.
//
// Thread contract: driven by one HealthChecker worker (Run is never called
// concurrently with itself); name() is safe anywhere.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "hpod/agent/health/health_checks.h"
#include "hpod/agent/health/nvml_api.h"
#include "hpod/agent/health/xid.h"

namespace hpod::agent::health {

struct GpuCheckOptions {
  // dlopen name or path: libnvidia-ml.so.1, or the fake's libhpod_fake_nvml.so.
  std::string library = "libnvidia-ml.so.1";
  // The node's ClusterInstanceType ("ml.p5.48xlarge"); "" until it is known.
  std::function<std::string()> instance_type;
  unsigned int max_temperature_c = 90;
};

class GpuCheck final : public Check {
 public:
  explicit GpuCheck(GpuCheckOptions options);
  ~GpuCheck() override;  // nvmlShutdown (the library stays loaded)
  std::string name() const override { return "gpu"; }
  Outcome Run() override;
  // A hung NVML call means a wedged driver or GPU; a reboot resets them.
  Verdict TimeoutVerdict() const override { return Verdict::kReboot; }

 private:
  struct Api;
  // Loads and initializes NVML once; "" on success, else why not.
  std::string Load();
  std::string Error(nvmlReturn_t r) const;

  const GpuCheckOptions options_;
  std::unique_ptr<Api> api_;
  bool tried_ = false;
  bool initialized_ = false;
  std::string load_error_;  // the NVML is not usable: why (skipped)
  std::string init_fault_;  // the NVML failed to initialize: why (Reboot)
  nvmlEventSet_t events_ = nullptr;
  std::vector<nvmlDevice_t> registered_;  // devices whose Xid events are in events_
  XidLedger xids_;
};

}  // namespace hpod::agent::health
