#include "hpod/agent/tenure.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <vector>

#include "hpod/agent/fs_util.h"
#include "hpod/agent/hosts_file.h"
#include "hpod/agent/shared_fs.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;

bool ValidInstanceId(const std::string& id) {
  if (id.size() < 3 || id.size() > 32 || id.rfind("i-", 0) != 0) return false;
  for (size_t i = 2; i < id.size(); ++i) {
    const char c = id[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// Points `link` at `target`, unless something that is not a link is there (the
// admin's own /opt/ml/config): that is left alone and logged.
void Link(const std::string& link, const std::string& target) {
  std::error_code ec;
  if (fs::exists(fs::symlink_status(link, ec)) && !fs::is_symlink(fs::symlink_status(link, ec))) {
    spdlog::warn("{} exists and is not a link; leaving it (this tenure's copy is in {})", link,
                 target);
    return;
  }
  fs::remove(link, ec);
  fs::create_directories(fs::path(link).parent_path(), ec);
  fs::create_directory_symlink(target, link, ec);
  if (ec) spdlog::warn("cannot link {} to {}: {}", link, target, ec.message());
}

// Removes `link` when it points into `dir`.
void Unlink(const std::string& link, const std::string& dir) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(link, ec))) return;
  const std::string target = fs::read_symlink(link, ec).string();
  if (!ec && target.rfind(dir, 0) == 0) fs::remove(link, ec);
}

}  // namespace

TenureRunner::TenureRunner(TenureOptions options) : options_(std::move(options)) {}

TenureRunner::~TenureRunner() { StopAgent(); }

std::string TenureRunner::TenureDir(const std::string& instance_id) const {
  return (fs::path(options_.state_dir) / "instances" / instance_id).string();
}

std::string TenureRunner::Current() const {
  if (!running_.empty()) return running_;
  std::error_code ec;
  std::set<std::string> found;
  for (const auto& e : fs::directory_iterator(fs::path(options_.state_dir) / "instances", ec)) {
    if (ValidInstanceId(e.path().filename().string())) found.insert(e.path().filename());
  }
  return found.empty() ? "" : *found.begin();
}

Status TenureRunner::Serve(const std::string& instance_id,
                           const std::optional<api::agentproto::SharedFilesystem>& shared_fs) {
  check_failed_ = false;
  if (!instance_id.empty() && !ValidInstanceId(instance_id)) {
    return InvalidArgumentError("hpodd assigned '" + instance_id +
                                "', which is not an instance id (i- and hex)");
  }
  // Every other tenure ends first: a host serves one instance at a time.
  std::error_code ec;
  std::vector<std::string> others;
  for (const auto& e : fs::directory_iterator(fs::path(options_.state_dir) / "instances", ec)) {
    const std::string id = e.path().filename();
    if (id != instance_id) others.push_back(id);
  }
  if (!running_.empty() && running_ != instance_id) others.push_back(running_);
  for (const std::string& id : others) HPOD_RETURN_IF_ERROR(End(id));
  if (instance_id.empty() || running_ == instance_id) return OkStatus();
  return Start(instance_id, shared_fs);
}

void TenureRunner::StopAgent() {
  if (!agent_) return;
  agent_->Stop();
  if (thread_.joinable()) thread_.join();
  agent_.reset();  // stops its Slurm daemons and sessions
  running_.clear();
}

Status TenureRunner::End(const std::string& instance_id) {
  const std::string dir = TenureDir(instance_id);
  spdlog::info("ending the tenure of {}: stopping its node agent and Slurm, wiping {}", instance_id,
               dir);
  if (running_ == instance_id) StopAgent();
  if (options_.kill_job_steps) KillJobSteps();
  if (!options_.systemd_unit_dir.empty()) (void)ReturnUnits(Handover());  // it logs failures
  // HyperPod's fault flag is the instance's: the host's next tenure starts clean.
  if (!options_.node_template.health.flag_file.empty()) {
    std::error_code flag;
    fs::remove(options_.node_template.health.flag_file, flag);
  }
  if (!options_.hosts_file.empty()) {
    if (Status s = WriteHostsBlock(options_.hosts_file, {}); !s.ok()) {
      spdlog::warn("removing the cluster's names from {}: {}", options_.hosts_file, s.message());
    }
  }
  std::error_code exists;
  if (fs::exists(fs::path(dir) / "fsx-mounted", exists)) {
    UnmountSharedFilesystem(options_.shared_fs_mount);
  }
  for (const auto& [link, sub] : options_.links) Unlink(link, dir);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) return InternalError("cannot wipe " + dir + ": " + ec.message());
  return OkStatus();
}

Status TenureRunner::Start(const std::string& instance_id,
                           const std::optional<api::agentproto::SharedFilesystem>& shared_fs) {
  const fs::path dir = TenureDir(instance_id);
  std::error_code ec;
  bool mounted = false;
  if (shared_fs) {
    // Before anything of the tenure exists: a host that fails leaves nothing.
    auto checked = EnsureSharedFilesystem(
        *shared_fs, {options_.shared_fs_mount, instance_id, options_.marker_wait});
    if (!checked.ok()) {
      check_failed_ = true;
      return checked.status();
    }
    mounted = *checked;
  }
  std::vector<std::string> subs = {"state", "config", "slurm-etc", "spool", "log", "lifecycle"};
  for (const auto& [link, sub] : options_.links) subs.push_back(sub);
  for (const std::string& sub : subs) {
    fs::create_directories(dir / sub, ec);
    if (ec) return InternalError("cannot create " + (dir / sub).string() + ": " + ec.message());
  }
  for (const auto& [link, sub] : options_.links) Link(link, (dir / sub).string());
  if (mounted) HPOD_RETURN_IF_ERROR(WriteFileAtomic((dir / "fsx-mounted").string(), "", 0644));
  if (!options_.systemd_unit_dir.empty()) {
    // Before the node agent and its scripts: their systemctl reaches hpod's daemons.
    if (Status s = HandOverUnits(Handover()); !s.ok()) {
      spdlog::warn("cannot hand the machine's Slurm and munge units to the node agent: {}",
                   s.message());
    }
  }
  AgentOptions o = options_.node_template;
  o.instance_id = instance_id;
  o.endpoint = options_.server;
  o.state_dir = (dir / "state").string();
  o.identity_dir = options_.state_dir;
  o.config_dir = (dir / "config").string();
  o.lifecycle_root = (dir / "lifecycle").string();
  o.local_socket = options_.local_socket;
  if (!options_.systemd_unit_dir.empty()) o.handed_units_systemctl = options_.systemctl;
  o.slurm.conf_dir = (dir / "slurm-etc").string();
  o.slurm.spool_dir = (dir / "spool").string();
  o.slurm.log_dir = (dir / "log").string();
  o.slurm.munge_dir.clear();  // <state>/munge
  o.slurm.hosts_file = options_.hosts_file;
  spdlog::info("serving instance {} (tenure {})", instance_id, dir.string());
  agent_ = std::make_unique<Agent>(o, RealClock::Get());
  Agent* agent = agent_.get();
  thread_ = std::thread([agent, instance_id] {
    const int rc = agent->Run();
    if (rc != 0) spdlog::error("the node agent of {} ended with {}", instance_id, rc);
  });
  running_ = instance_id;
  return OkStatus();
}

SystemdHandoverOptions TenureRunner::Handover() const {
  SystemdHandoverOptions h;
  h.unit_dir = options_.systemd_unit_dir;
  h.systemctl = options_.systemctl;
  std::error_code ec;
  // After a package upgrade the running program's link reads "… (deleted)";
  // the drop-ins name the path, where the new program now is. Empty on an
  // error: HandOverUnits refuses it.
  std::string self = fs::read_symlink("/proc/self/exe", ec).string();
  constexpr std::string_view kDeleted = " (deleted)";
  if (self.size() > kDeleted.size() && self.ends_with(kDeleted)) {
    self.resize(self.size() - kDeleted.size());
  }
  h.agent_program = ec ? "" : self;
  h.socket = options_.local_socket;
  // The machine's, not the tenure's: the drop-ins are the machine's too, and
  // what ran before must be given back even if a tenure's directory is lost.
  h.state_file = (fs::path(options_.state_dir) / "systemd-units").string();
  return h;
}

void KillJobSteps() {
  // pid → parent, and the slurmstepd pids.
  std::map<int, int> parent;
  std::vector<int> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const int pid = std::stoi(name);
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    // pid (comm) state ppid ...: comm may hold spaces and parentheses.
    const auto open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    const std::string comm = line.substr(open + 1, close - open - 1);
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %*c %d", &ppid) != 1) continue;
    parent[pid] = ppid;
    if (comm == "slurmstepd") steps.push_back(pid);
  }
  if (steps.empty()) return;
  std::set<int> doomed(steps.begin(), steps.end());
  for (bool grew = true; grew;) {
    grew = false;
    for (const auto& [pid, ppid] : parent) {
      if (doomed.count(ppid) && doomed.insert(pid).second) grew = true;
    }
  }
  spdlog::info("killing {} job step process(es) of the ending tenure", doomed.size());
  for (int pid : doomed) ::kill(pid, SIGKILL);
}

}  // namespace hpod::agent
