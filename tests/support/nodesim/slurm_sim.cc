#include "slurm_sim.h"

#include <time.h>

#include <cmath>
#include <sstream>

namespace hpod::nodesim {

namespace proto = api::agentproto;

std::string SlurmTime(double epoch) {
  time_t t = static_cast<time_t>(std::floor(epoch));
  struct tm local {};
  localtime_r(&t, &local);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &local);
  return buf;
}

SlurmSim::Row& SlurmSim::RowOf(const std::string& name) {
  auto [it, added] = rows_.try_emplace(name);
  if (added) it->second.start_time = "None";
  return it->second;
}

std::string SlurmSim::SlurmdStarted(const std::string& name, const std::string& instance_id,
                                    double started, const std::string& avoid) {
  Row& row = RowOf(name);
  std::string start = SlurmTime(started);
  if (start == avoid) start = SlurmTime(started + 1);
  row.owner = instance_id;
  row.start_time = start;
  version_++;
  return start;
}

void SlurmSim::SlurmdStopped(const std::string& name, const std::string& instance_id) {
  auto it = rows_.find(name);
  if (it == rows_.end() || it->second.owner != instance_id) return;
  it->second.owner.clear();
  version_++;
}

void SlurmSim::Run(const std::vector<std::string>& argv, proto::CommandResult* result) {
  result->exit_code = 0;
  size_t i = 0;
  if (i < argv.size() && argv[i] == "env") {
    for (i++; i < argv.size() && argv[i].find('=') != std::string::npos; i++) {
    }
  }
  if (i + 1 >= argv.size() || argv[i] != "scontrol" || argv[i + 1] != "update") {
    return;  // squeue, requeue, reconfigure, shutdown...: nothing to show, success
  }
  std::vector<std::string> names;
  std::string state, reason;
  for (i += 2; i < argv.size(); i++) {
    const std::string& a = argv[i];
    auto eq = a.find('=');
    if (eq == std::string::npos) continue;
    std::string key = a.substr(0, eq), value = a.substr(eq + 1);
    for (auto& ch : key) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    if (key == "nodename") {
      std::stringstream ss(value);
      for (std::string n; std::getline(ss, n, ',');) {
        if (!n.empty()) names.push_back(n);
      }
    } else if (key == "state") {
      state = value;
      for (auto& ch : state) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    } else if (key == "reason") {
      reason = value;
    }
  }
  if (state.empty()) return;  // nodeaddr=...: nothing Report shows
  if (state != "DRAIN" && state != "FAIL" && state != "RESUME" && state != "DOWN") {
    result->exit_code = 1;
    result->stderr_data = "Invalid node state specified";
    return;
  }
  for (const std::string& name : names) {
    Row& row = RowOf(name);
    if (state == "RESUME") {
      row.flag.clear();
      row.reason.clear();
    } else {
      row.flag = state == "DOWN" ? "DRAIN" : state;
      row.reason = reason;
    }
  }
  version_++;
}

std::vector<proto::SlurmNodeEntry> SlurmSim::Report(const std::vector<std::string>& names) const {
  std::vector<proto::SlurmNodeEntry> out;
  out.reserve(names.size());
  for (const std::string& name : names) {
    proto::SlurmNodeEntry e;
    e.name = name;
    e.slurmd_start_time = "None";
    auto it = rows_.find(name);
    bool up = false;
    if (it != rows_.end()) {
      up = !it->second.owner.empty();
      e.slurmd_start_time = it->second.start_time;
      e.reason = it->second.reason;
      if (!it->second.flag.empty()) e.state = "+" + it->second.flag;
    }
    e.state = (up ? "IDLE" : "DOWN*") + e.state;
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace hpod::nodesim
