#include "hpod/agent/service_handoff.h"

#include <filesystem>

#include "hpod/base/subprocess.h"

namespace hpod::agent {

namespace fs = std::filesystem;

bool ShouldHandOff(const ServiceHandoff& h, const std::string& state_dir) {
  std::error_code ec;
  if (!fs::is_directory(h.systemd_run_dir, ec)) return false;
  if (fs::weakly_canonical(state_dir, ec) != fs::weakly_canonical(h.unit_state_dir, ec)) {
    return false;
  }
  for (const std::string& unit : h.unit_files) {
    if (fs::exists(unit, ec)) return true;
  }
  return false;
}

Status HandOff(const ServiceHandoff& h, std::chrono::milliseconds timeout) {
  for (const char* verb : {"enable", "restart"}) {
    SubprocessOptions o;
    o.argv = {h.systemctl, verb, "hpod-agent.service"};
    o.timeout = timeout;
    HPOD_ASSIGN_OR_RETURN(SubprocessResult r, RunCommand(o));
    const std::string what = "systemctl " + std::string(verb) + " hpod-agent.service";
    if (r.timed_out) {
      const int64_t ms = timeout.count();
      return FailedPreconditionError(
          what + " timed out after " +
          (ms % 1000 == 0 ? std::to_string(ms / 1000) + " s" : std::to_string(ms) + " ms"));
    }
    if (r.exit_code == 0) continue;
    std::string why = r.stderr_data.empty() ? r.stdout_data : r.stderr_data;
    while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
    if (auto nl = why.find('\n'); nl != std::string::npos) why = why.substr(0, nl);
    return FailedPreconditionError(what + " exited " + std::to_string(r.exit_code) +
                                   (why.empty() ? "" : ": " + why));
  }
  return OkStatus();
}

}  // namespace hpod::agent
