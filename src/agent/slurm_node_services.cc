// SlurmNode's daemons beside Slurm's own (slurm_node.h): sshd with the cluster's
// host keys (ssh_node.h) and, on a controller with accounting, MariaDB and
// slurmdbd (slurm_accounting.h). Runs on SlurmNode's worker thread.

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <filesystem>

#include "hpod/agent/fs_util.h"
#include "hpod/agent/slurm_node.h"

namespace hpod::agent {

namespace fs = std::filesystem;

void SlurmNode::ApplySsh(const SlurmSpec& spec) {
  auto drop = [this] {
    if (sshd_) StopDaemon(*sshd_);
    sshd_.reset();
  };
  if (spec.ssh_host_key.empty()) return drop();
  std::error_code ec;
  if (fs::exists(options_.shared_root_marker, ec)) {
    spdlog::warn(
        "this node shares the host's root filesystem: no sshd (it would take over the "
        "host's /etc/ssh)");
    return drop();
  }
  if (::access(options_.sshd.c_str(), X_OK) != 0) {
    spdlog::warn("{} is not installed (Debian's openssh-server): no SSH between the nodes",
                 options_.sshd);
    return drop();
  }
  auto key_changed = WriteSshSetup(options_.ssh, spec.ssh_host_key, spec.ssh_known_hosts);
  if (!key_changed.ok()) {
    spdlog::warn("cannot set up SSH between the nodes: {}", key_changed.status().message());
    return;
  }
  auto argv = SshdArgv(options_.sshd, options_.ssh, spec.hosts.at(spec.node_name));
  if (!sshd_) sshd_ = NewDaemon("sshd");
  if ((*key_changed || sshd_->options.argv != argv) && sshd_->proc) StopDaemon(*sshd_);
  sshd_->options.argv = argv;
  sshd_->options.output_file = options_.log_dir + "/sshd.log";
}

Status SlurmNode::ApplyAccounting(const SlurmSpec& spec) {
  std::error_code ec;
  const bool shared_root = fs::exists(options_.shared_root_marker, ec);
  if (!spec.accounting || shared_root) {
    if (spec.accounting) {
      spdlog::warn(
          "this node shares the host's root filesystem: no MariaDB or slurmdbd, so "
          "slurmctld runs without accounting's database and sacct fails");
    }
    for (std::unique_ptr<Daemon>* d : {&slurmdbd_, &mariadb_}) {
      if (*d) StopDaemon(**d);
      d->reset();
    }
    return OkStatus();
  }
  HPOD_RETURN_IF_ERROR(PrepareMariadb(options_.accounting));
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  std::string short_host(host);
  short_host = short_host.substr(0, short_host.find('.'));
  const std::string conf = options_.conf_dir + "/slurmdbd.conf";
  const std::string text = RenderSlurmdbdConf(short_host, options_.log_dir, options_.run_dir);
  auto old = ReadFile(conf);
  if (!old.ok() || *old != text) HPOD_RETURN_IF_ERROR(WriteFileAtomic(conf, text, 0600));
  if (!mariadb_) {
    mariadb_ = NewDaemon("mariadbd");
    mariadb_->options.argv = MariadbdArgv(options_.accounting);
    mariadb_->options.output_file = options_.accounting.log_dir + "/mariadbd.out";
  }
  if (!slurmdbd_) {
    slurmdbd_ = NewDaemon("slurmdbd");
    // slurmdbd.conf is found beside $SLURM_CONF.
    slurmdbd_->options.argv = {options_.accounting.slurmdbd, "-D"};
    slurmdbd_->options.env = {{"SLURM_CONF", options_.conf_dir + "/slurm.conf"}};
    slurmdbd_->options.output_file = options_.log_dir + "/slurm/slurmdbd.out";
  }
  return OkStatus();
}

bool SlurmNode::AccountingReady(Daemon& d) {
  if (&d == mariadb_.get()) {
    auto db = EnsureAccountingDatabase(options_.accounting);
    if (!db.ok()) spdlog::warn("{}", db.status().message());
    return db.ok() && *db;
  }
  const std::string conf = options_.conf_dir + "/slurm.conf";
  auto text = ReadFile(conf);
  auto r = EnsureClusterRegistered(options_.accounting, conf,
                                   ClusterNameOf(text.ok() ? *text : std::string()));
  if (!r.ok()) spdlog::warn("{}", r.status().message());
  if (r.ok() && *r) spdlog::info("slurmdbd runs and knows the cluster; slurmctld may start");
  return r.ok() && *r;
}

}  // namespace hpod::agent
