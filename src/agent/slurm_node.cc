#include "hpod/agent/slurm_node.h"

#include <grp.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "hpod/agent/fs_util.h"
#include "hpod/agent/hosts_file.h"
#include "hpod/agent/machine_facts.h"
#include "hpod/agent/slurm_layout.h"
#include "hpod/agent/user_lookup.h"
#include "hpod/base/backoff.h"
#include "hpod/base/crypto.h"
#include "hpod/slurm/config.h"

namespace hpod::agent {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr char kUserConfText[] =
    "# Your own Slurm settings. slurm.conf Includes this file; hpod never rewrites it.\n"
    "# Settings here override hpod's (the last value wins). Apply changes with\n"
    "# `scontrol reconfigure` on the controller.\n";

using Owner = UserEntry;

// mkdir -p, then the mode and (when given) owner of the last component.
Status MakeDir(const std::string& path, mode_t mode, std::optional<Owner> owner) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) return InternalError("cannot create " + path + ": " + ec.message());
  if (::chmod(path.c_str(), mode) != 0) return InternalError("cannot chmod " + path);
  if (owner && ::chown(path.c_str(), owner->uid, owner->gid) != 0) {
    return InternalError("cannot chown " + path);
  }
  return OkStatus();
}

// Writes only when the content differs, so an unchanged config keeps its mtime.
StatusOr<bool> WriteIfChanged(const std::string& path, const std::string& data, mode_t mode) {
  auto old = ReadFile(path);
  if (old.ok() && *old == data) return false;
  HPOD_RETURN_IF_ERROR(WriteFileAtomic(path, data, mode));
  return true;
}

// SlurmNode::JobHostname for `spec`.
std::string JobHostnameOf(const SlurmSpec& spec) {
  if (spec.role != "compute" || spec.node_name.empty() || spec.node_name == MachineHostname()) {
    return "";
  }
  return spec.node_name;
}

}  // namespace

StatusOr<SlurmSpec> ParseSlurmSpec(const Json& m) {
  HPOD_ASSIGN_OR_RETURN(api::agentproto::SlurmRole r, api::agentproto::SlurmRole::FromJson(m));
  SlurmSpec s;
  s.role = std::move(r.role);
  if (s.role == "none") {
    s.node_name = std::move(r.node_name);
    s.motd = std::move(r.motd);
    return s;
  }
  if (s.role != "controller" && s.role != "login" && s.role != "compute") {
    return InvalidArgumentError("slurm.role '" + s.role +
                                "' is not controller, login, compute or none");
  }
  s.node_name = std::move(r.node_name);
  s.controller_addr = std::move(r.controller_addr);
  auto decoded = Base64UrlDecode(r.munge_key);
  if (!decoded.ok() || decoded->size() < 32) {
    return InvalidArgumentError("slurm.munge_key is not a base64url key of at least 32 bytes");
  }
  s.munge_key = *decoded;
  s.conf_hash = std::move(r.conf_hash);
  s.gpu_device_dir = std::move(r.gpu_device_dir);
  s.avoid_start_time = std::move(r.avoid_start_time);
  s.motd = std::move(r.motd);
  for (auto& [name, content] : r.files) {
    // Plain names only: the files land in the config directory and nowhere else.
    if (name.empty() || name.find('/') != std::string::npos || name[0] == '.') {
      return InvalidArgumentError("slurm.files has a bad entry '" + name + "'");
    }
    s.files[name] = std::move(content);
  }
  s.node_names = std::move(r.node_names);
  for (auto& [name, addr] : r.hosts) {
    // One line each in /etc/hosts: nothing that could break it.
    if (name.empty() || addr.empty() ||
        (name + addr).find_first_of(" \t\n#") != std::string::npos) {
      return InvalidArgumentError("slurm.hosts has a bad entry '" + name + "'");
    }
    s.hosts[name] = std::move(addr);
  }
  s.stand_in_gpus = static_cast<int>(std::clamp<int64_t>(r.stand_in_gpus, 0, 64));
  if (!r.ssh_host_key.empty() && s.hosts.find(s.node_name) == s.hosts.end()) {
    return InvalidArgumentError("slurm.ssh_host_key comes without the node's address in hosts");
  }
  s.ssh_host_key = std::move(r.ssh_host_key);
  s.ssh_known_hosts = std::move(r.ssh_known_hosts);
  s.accounting = r.accounting && s.role == "controller";
  s.hold = r.hold;
  return s;
}

// Whether `desired` differs from what was applied in anything ApplySpec acts on.
static bool NeedsApply(const std::optional<SlurmSpec>& desired,
                       const std::optional<SlurmSpec>& applied) {
  return desired &&
         (!applied || desired->role != applied->role || desired->conf_hash != applied->conf_hash ||
          desired->munge_key != applied->munge_key ||
          desired->controller_addr != applied->controller_addr || desired->hold != applied->hold);
}

SlurmNode::SlurmNode(SlurmNodeOptions options, const Clock& clock, StateCallback on_state,
                     NodesCallback on_nodes)
    : options_(std::move(options)),
      clock_(clock),
      on_state_(std::move(on_state)),
      on_nodes_(std::move(on_nodes)) {
  worker_ = std::thread([this] { Loop(); });
}

SlurmNode::~SlurmNode() { Stop(); }

void SlurmNode::Apply(SlurmSpec spec) {
  // The no-Slurm marker and motd are written here, not on the worker: hpodd's next
  // message may open a session, which must already find them.
  if (spec.role == "none") {
    Status s =
        WriteIfChanged(options_.no_slurm_marker,
                       "this hpod cluster has no Slurm; see " + options_.motd_path + "\n", 0644)
            .status();
    if (s.ok() && !spec.motd.empty())
      s = WriteIfChanged(options_.motd_path, spec.motd, 0644).status();
    if (!s.ok()) spdlog::warn("cannot mark the node as having no Slurm: {}", s.message());
  } else {
    std::error_code ec;
    fs::remove(options_.no_slurm_marker, ec);
  }
  if (!options_.hosts_file.empty() && !spec.hosts.empty()) {
    // Before slurmd or a job resolves a name: the block follows every move.
    if (Status s = WriteHostsBlock(options_.hosts_file, spec.hosts); !s.ok()) {
      spdlog::warn("cannot keep the cluster's names in {}: {}", options_.hosts_file, s.message());
    }
  }
  MutexLock lock(mu_);
  desired_ = std::move(spec);
  cv_.notify_all();
}

std::string SlurmNode::JobHostname() const {
  MutexLock lock(mu_);
  return desired_ ? JobHostnameOf(*desired_) : "";
}

std::string SlurmNode::ControllerTarget() const {
  MutexLock lock(mu_);
  if (!desired_ || desired_->role == "controller" || desired_->controller_addr.empty()) return "";
  return desired_->controller_addr + ":" + std::to_string(slurm::kSlurmctldPort);
}

api::agentproto::SlurmStatus SlurmNode::State() const {
  MutexLock lock(mu_);
  return state_;
}

void SlurmNode::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
}

void SlurmNode::SetState(const std::string& daemon, const std::string& message) {
  api::agentproto::SlurmStatus next{applied_ ? applied_->role : "",
                                    applied_ ? applied_->conf_hash : "", daemon, restarts_,
                                    message};
  next.held = applied_ && applied_->hold;
  // Only for a slurmd that runs: hpodd tells its row in Slurm from a predecessor's by
  // it, both times read from this node's clock.
  if (applied_ && applied_->role == "compute" && daemon_ && daemon_->proc) {
    next.slurmd_started = daemon_->started_epoch;
  }
  {
    MutexLock lock(mu_);
    if (next == state_) return;
    state_ = next;
  }
  if (on_state_) on_state_(next);
}

void SlurmNode::Loop() {
  for (;;) {
    std::optional<SlurmSpec> desired;
    UnitWishes wishes;
    {
      MutexLock lock(mu_);
      auto wake = [&]() REQUIRES(mu_) {
        return stopping_ || poked_ || NeedsApply(desired_, applied_);
      };
      // Nodes without a Slurm role (or before it arrives) cost no wakeups.
      if (applied_ && applied_->role != "none") {
        // Daemons starting, restarting or being reconfigured are watched closely;
        // settled ones once a second (a dead one is noticed within that).
        const bool settled = munged_ && munged_->ready &&
                             (!daemon_ || daemon_->ready || main_held_) &&
                             (!slurmdbd_ || slurmdbd_->ready) && !reconfigure_pending_;
        auto tick = std::chrono::milliseconds(settled ? 1000 : 200);
        // The node table is polled while slurmctld runs (before, or after a
        // systemctl stop, there is nothing to poll).
        if (applied_->role == "controller" && daemon_ && daemon_->proc && daemon_->ready) {
          auto until_poll = std::chrono::duration_cast<std::chrono::milliseconds>(
              next_poll_ - clock_.SteadyNow());
          tick = std::clamp(until_poll, std::chrono::milliseconds(10), tick);
        }
        lock.WaitFor(cv_, tick, wake);
      } else {
        lock.Wait(cv_, wake);
      }
      if (stopping_) break;
      desired = desired_;
      wishes.intents = intents_;
      wishes.restarts.swap(restart_requests_);
      wishes.kicks.swap(kick_requests_);
      wishes.reloads.swap(reload_requests_);
      wishes.disabled = disabled_;
      wishes.auto_start = auto_start_;
      wishes.version = wish_version_;
      poked_ = false;
    }
    if (NeedsApply(desired, applied_) && desired->role == "none") {
      // Nothing to run (Apply wrote the motd and the marker); daemons of an earlier
      // role stop.
      StopAll();
      reconfigure_pending_ = false;
      applied_ = desired;
      SetState("none", "");
      PublishUnits(wishes, Wanted{});
      continue;
    }
    if (NeedsApply(desired, applied_)) {
      bool restart_ctld = false, reconfigure = false;
      Status s = ApplySpec(*desired, &restart_ctld, &reconfigure);
      if (!s.ok()) {
        spdlog::error("cannot apply the Slurm configuration: {}", s.message());
        SetState("failed", std::string(s.message()));
        // systemctl hears the last states now, not after its whole wait; its
        // restarts wait for a pass that can do them.
        PublishUnits(wishes, ComputeWanted(wishes));
        // Retried on the next change or after a pause; the spec stays desired.
        MutexLock lock(mu_);
        restart_requests_.insert(wishes.restarts.begin(), wishes.restarts.end());
        kick_requests_.insert(wishes.kicks.begin(), wishes.kicks.end());
        reload_requests_.insert(wishes.reloads.begin(), wishes.reloads.end());
        lock.WaitFor(cv_, std::chrono::seconds(2), [&]() REQUIRES(mu_) { return stopping_; });
        continue;
      }
      if (restart_ctld && daemon_ && daemon_->proc) {
        spdlog::info(
            "the node set changed: restarting slurmctld (22.05 cannot reconfigure a "
            "changed node count)");
        StopDaemon(*daemon_);
        daemon_->start_after = {};
        reconfigure_pending_ = true;
      } else if (reconfigure) {
        reconfigure_pending_ = true;
      }
      // Only now: a slurmctld being restarted for the new node set must not be
      // reported running with the new hash (hpodd starts new workers' slurmd on it).
      const Daemon& main = daemon_ ? *daemon_ : *munged_;
      main_held_ = daemon_ && !ComputeWanted(wishes).main;
      SetState(main.ready ? "running" : (main_held_ && !main.proc ? "held" : "starting"), "");
    }
    if (!applied_ || applied_->role == "none") {
      PublishUnits(wishes, Wanted{});
      continue;
    }
    const Wanted wanted = ComputeWanted(wishes);
    RestartRequested(wishes);
    StartRequested(wishes);
    Keep(*munged_, wanted.munged);
    if (sshd_) Keep(*sshd_, wanted.sshd);
    if (mariadb_) Keep(*mariadb_, wanted.mariadb);
    // Each waits for the one before it only while that one is wanted: a
    // systemctl stop of slurmdbd leaves a started slurmctld to run without it,
    // as systemd's ordering would.
    const bool db_ready = !mariadb_ || mariadb_->ready || !wanted.mariadb;
    if (slurmdbd_ && ((munged_->ready && db_ready) || slurmdbd_->proc || !wanted.slurmdbd)) {
      Keep(*slurmdbd_, wanted.slurmdbd);
    }
    if (daemon_) {
      // slurmctld and slurmd authenticate through munged from their first message;
      // with accounting, slurmctld starts once slurmdbd knows the cluster.
      const bool dbd_ready = !slurmdbd_ || slurmdbd_->ready || !wanted.slurmdbd;
      if ((munged_->ready && dbd_ready) || daemon_->proc || !wanted.main) {
        Keep(*daemon_, wanted.main);
      }
      main_held_ = !wanted.main;
      if (main_held_ && !daemon_->proc) SetState("held", "");
    } else if (munged_->ready) {
      SetState("running", "");  // login: clients only
    }
    PublishUnits(wishes, wanted);
    if (applied_->role == "controller" && daemon_->proc && daemon_->ready) {
      if (reconfigure_pending_) {
        auto r = RunCommand({.argv = {options_.scontrol, "reconfigure"},
                             .env = {{"SLURM_CONF", options_.conf_dir + "/slurm.conf"}},
                             .timeout = std::chrono::seconds(15)});
        if (r.ok() && r->exit_code == 0) {
          reconfigure_pending_ = false;
          spdlog::info("scontrol reconfigure: done");
        } else {
          spdlog::warn("scontrol reconfigure failed: {}",
                       r.ok() ? r->stderr_data : std::string(r.status().message()));
        }
      }
      if (clock_.SteadyNow() >= next_poll_) {
        PollNodes();
        // While nodes are still joining (or leaving) hpodd waits on this table, so
        // it is polled five times as often until Slurm has settled.
        bool settled = last_nodes_ && last_nodes_->size() == applied_->node_names.size() &&
                       std::all_of(last_nodes_->begin(), last_nodes_->end(),
                                   [](const slurm::SlurmNodeState& n) { return n.Registered(); });
        next_poll_ =
            clock_.SteadyNow() + (settled ? options_.poll_interval : options_.poll_interval / 5);
      }
    }
  }
  StopAll();
}

void SlurmNode::StopAll() {
  // slurmctld before slurmdbd before MariaDB: each saves its state to the next.
  for (std::unique_ptr<Daemon>* d : {&daemon_, &slurmdbd_, &mariadb_, &munged_, &sshd_}) {
    if (*d) StopDaemon(**d);
    d->reset();
  }
}

Status SlurmNode::ApplySpec(const SlurmSpec& spec, bool* restart_ctld, bool* reconfigure) {
  std::optional<Owner> munge = LookupUser(options_.munge_user);
  if (!options_.munge_user.empty() && !munge) {
    return FailedPreconditionError("user '" + options_.munge_user +
                                   "' does not exist (is the munge package installed?)");
  }
  const std::string munge_run = options_.run_dir + "/munge";
  const std::string munge_log = options_.log_dir + "/munge";
  HPOD_RETURN_IF_ERROR(MakeDir(options_.munge_dir, 0700, munge));
  // munged refuses a socket directory that others cannot traverse.
  HPOD_RETURN_IF_ERROR(MakeDir(munge_run, 0755, munge));
  HPOD_RETURN_IF_ERROR(MakeDir(munge_log, 0700, munge));
  HPOD_RETURN_IF_ERROR(MakeDir(options_.log_dir + "/slurm", 0755, std::nullopt));
  // HyperPod's /opt/slurm/{bin,sbin} beside conf_dir (slurm_layout.h): a
  // convenience, never a reason to hold the node out of Slurm.
  if (Status s = LinkSlurmLayout(fs::path(options_.conf_dir).parent_path().string()); !s.ok()) {
    spdlog::warn("cannot link Slurm's programs under /opt/slurm: {}", s.message());
  }
  const std::string key_path = options_.munge_dir + "/munge.key";
  HPOD_ASSIGN_OR_RETURN(bool key_changed, WriteIfChanged(key_path, spec.munge_key, 0400));
  if (munge && ::chown(key_path.c_str(), munge->uid, munge->gid) != 0) {
    return InternalError("cannot chown " + key_path);
  }
  if (key_changed && munged_ && munged_->proc) StopDaemon(*munged_);  // restarts with the key

  if (spec.role == "controller" || spec.role == "login") {
    HPOD_RETURN_IF_ERROR(MakeDir(options_.conf_dir, 0755, std::nullopt));
    for (const auto& [name, content] : spec.files) {
      HPOD_RETURN_IF_ERROR(WriteIfChanged(options_.conf_dir + "/" + name, content, 0644).status());
    }
    const std::string user_conf = options_.conf_dir + "/slurm.user.conf";
    if (!fs::exists(user_conf))
      HPOD_RETURN_IF_ERROR(WriteFileAtomic(user_conf, kUserConfText, 0644));
    // Clients without SLURM_CONF look in /run/slurm/conf when /etc/slurm/slurm.conf
    // is absent (configless slurmd makes the same link on workers).
    HPOD_RETURN_IF_ERROR(MakeDir(options_.run_dir + "/slurm", 0755, std::nullopt));
    std::error_code ec;
    const std::string link = options_.run_dir + "/slurm/conf";
    if (!fs::is_symlink(link, ec)) fs::create_directory_symlink(options_.conf_dir, link, ec);
  }
  if (spec.role == "controller") {
    HPOD_RETURN_IF_ERROR(MakeDir(options_.spool_dir + "/slurmctld", 0755, std::nullopt));
  } else if (spec.role == "compute") {
    HPOD_RETURN_IF_ERROR(MakeDir(options_.spool_dir + "/slurmd", 0755, std::nullopt));
  }
  if (spec.stand_in_gpus > 0 && !spec.gpu_device_dir.empty()) {
    // Slurm needs character devices behind Gres File= (regular files are refused);
    // these carry NVIDIA's major number and stand in for GPUs the host lacks.
    HPOD_RETURN_IF_ERROR(MakeDir(spec.gpu_device_dir, 0755, std::nullopt));
    for (int i = 0; i < spec.stand_in_gpus; ++i) {
      std::string dev = spec.gpu_device_dir + "/nvidia" + std::to_string(i);
      if (!fs::exists(dev) && ::mknod(dev.c_str(), S_IFCHR | 0666, makedev(195, i)) != 0) {
        return InternalError("cannot create the stand-in GPU device " + dev);
      }
    }
  }
  if (!spec.motd.empty())
    HPOD_RETURN_IF_ERROR(WriteIfChanged(options_.motd_path, spec.motd, 0644).status());
  ApplySsh(spec);
  HPOD_RETURN_IF_ERROR(ApplyAccounting(spec));

  if (!munged_) {
    munged_ = NewDaemon("munged");
    std::vector<std::string> argv;
    if (munge) {
      argv = {"setpriv", "--reuid=" + options_.munge_user, "--regid=" + options_.munge_user,
              "--clear-groups"};
    }
    for (std::string a :
         {options_.munged, std::string("--foreground"), "--key-file=" + key_path,
          "--seed-file=" + options_.munge_dir + "/munged.seed",
          "--log-file=" + munge_log + "/munged.log", "--pid-file=" + munge_run + "/munged.pid",
          "--socket=" + munge_run + "/munge.socket.2"}) {
      argv.push_back(a);
    }
    munged_->options.argv = argv;
    munged_->options.output_file = munge_log + "/munged.out";
  }
  const bool first = !applied_ || applied_->role == "none";
  if (spec.role != "login") {
    std::vector<std::string> argv;
    std::string out;
    if (spec.role == "controller") {
      argv = {options_.slurmctld, "-D", "-f", options_.conf_dir + "/slurm.conf"};
      out = options_.log_dir + "/slurm/slurmctld.out";
    } else {
      argv = {options_.slurmd, "-D", "--conf-server", spec.controller_addr + ":6817"};
      // The node's NodeName, whatever the machine's own hostname is (a pool
      // host keeps its name; the logical node's is ip-a-b-c-d).
      if (!spec.node_name.empty()) argv.insert(argv.end(), {"-N", spec.node_name});
      out = options_.log_dir + "/slurm/slurmd.out";
    }
    // A machine serving a NodeName not its own (a pool host that replaced a
    // node) runs slurmd, and so the jobs' scripts and sruns, under the NodeName.
    // slurmctld calls an srun back at the host srun names, its own hostname,
    // looked up as a NodeName first: a replacement's machine name is unknown on
    // the controller, or is the NodeName another machine serves (the pool's
    // first hosts named the nodes): the SRUN_STEP_MISSING that ends a step on
    // a lost node went nowhere, and the step's srun waited for good.
    const std::string uts_hostname = JobHostnameOf(spec);
    if (!daemon_) {
      daemon_ = NewDaemon(spec.role == "controller" ? "slurmctld" : "slurmd");
    } else if ((daemon_->options.argv != argv || daemon_->options.uts_hostname != uts_hostname) &&
               daemon_->proc) {
      StopDaemon(*daemon_);  // a new controller address
      daemon_->start_after = {};
    }
    daemon_->options.argv = argv;
    daemon_->options.uts_hostname = uts_hostname;
    daemon_->options.output_file = out;
    if (spec.role == "controller") {
      daemon_->options.env["SLURM_CONF"] = options_.conf_dir + "/slurm.conf";
    }
  }
  if (!first && spec.role == "controller") {
    *restart_ctld = applied_->node_names != spec.node_names;
    *reconfigure = applied_->conf_hash != spec.conf_hash;
  }
  applied_ = spec;
  return OkStatus();
}

void SlurmNode::PollNodes() {
  auto r = RunCommand({.argv = {options_.scontrol, "-o", "show", "nodes"},
                       .env = {{"SLURM_CONF", options_.conf_dir + "/slurm.conf"}},
                       .timeout = std::chrono::seconds(5)});
  if (!r.ok() || r->exit_code != 0) return;
  auto nodes = slurm::ParseShowNodes(r->stdout_data);
  if (last_nodes_ && *last_nodes_ == nodes && !resend_nodes_.exchange(false)) return;
  last_nodes_ = nodes;
  if (on_nodes_) on_nodes_(nodes);
}

}  // namespace hpod::agent
