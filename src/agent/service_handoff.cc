#include "hpod/agent/service_handoff.h"

#include <filesystem>

#include "hpod/base/subprocess.h"

namespace hpod::agent {

namespace fs = std::filesystem;

bool ShouldHandOff(const ServiceHandoff& h, const std::string& state_dir,
                   bool invoked_by_systemd) {
  std::error_code ec;
  if (invoked_by_systemd || !fs::is_directory(h.systemd_run_dir, ec)) return false;
  if (fs::weakly_canonical(state_dir, ec) != fs::weakly_canonical(h.unit_state_dir, ec)) {
    return false;
  }
  for (const std::string& unit : h.unit_files) {
    if (fs::exists(unit, ec)) return true;
  }
  return false;
}

Status HandOff(const ServiceHandoff& h) {
  SubprocessOptions o;
  o.argv = {h.systemctl, "enable", "--now", "hpod-agent.service"};
  HPOD_ASSIGN_OR_RETURN(SubprocessResult r, RunCommand(o));
  if (r.exit_code == 0) return OkStatus();
  std::string why = r.stderr_data.empty() ? r.stdout_data : r.stderr_data;
  while (!why.empty() && (why.back() == '\n' || why.back() == ' ')) why.pop_back();
  if (auto nl = why.find('\n'); nl != std::string::npos) why = why.substr(0, nl);
  return FailedPreconditionError("systemctl enable --now hpod-agent.service exited " +
                                 std::to_string(r.exit_code) + (why.empty() ? "" : ": " + why));
}

}  // namespace hpod::agent
