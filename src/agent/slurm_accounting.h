#pragma once

// Slurm accounting on the controller (issue 28): MariaDB (Debian's) and slurmdbd,
// started by the agent in the order HyperPod's setup_mariadb_accounting.sh leaves
// them — the database first, then slurmdbd, the cluster registered in it, and only
// then slurmctld (a slurmctld that meets a slurmdbd without its cluster, or with
// another cluster id, is HyperPod users' "CLUSTER ID MISMATCH" crash loop).
// SlurmNode supervises both daemons beside munged; this file holds the steps.
//
// The database lives in /var/lib/hpod-mysql, initialized on the node at first
// need (a local node's root is its own, on the node's disk), so it survives a
// reboot of the controller as a disk would. MariaDB listens on its Unix socket
// only; slurmdbd reaches it as root through unix_socket authentication, so no
// password exists to leak.
//
// Thread contract: free functions; run by SlurmNode's worker thread.

#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/base/subprocess.h"

namespace hpod::agent {

struct AccountingOptions {
  std::string mariadbd = "/usr/sbin/mariadbd";
  std::string install_db = "/usr/bin/mariadb-install-db";
  std::string mariadb = "/usr/bin/mariadb";  // the client
  std::string slurmdbd = "slurmdbd";
  std::string sacctmgr = "sacctmgr";
  std::string mysql_user = "mysql";
  // hpod's own datadir, never the machine's /var/lib/mysql: that one may belong
  // to a MariaDB the host runs (a local node's root shows the host's files).
  std::string datadir = "/var/lib/hpod-mysql";
  std::string socket_dir = "/run/mysqld";
  std::string log_dir = "/var/log/mysql";
};

inline constexpr char kAccountingDatabase[] = "slurm_acct_db";

// slurmdbd.conf: slurmdbd as root on `dbd_host` (the machine's short hostname,
// which slurmdbd checks), MariaDB through its default socket (socket_dir must be
// /run/mysqld, where Debian's client library looks), logs under `log_dir`/slurm.
std::string RenderSlurmdbdConf(const std::string& dbd_host, const std::string& log_dir,
                               const std::string& run_dir);

// The socket and log directories (owned by the mysql user), and the datadir
// initialized (mariadb-install-db into a temporary directory, renamed when done,
// so an install cut short is redone) when it does not exist yet.
Status PrepareMariadb(const AccountingOptions& o);

// mariadbd in the foreground as the mysql user, on its socket only.
std::vector<std::string> MariadbdArgv(const AccountingOptions& o);
std::string MariadbSocket(const AccountingOptions& o);

// Whether MariaDB answers on its socket; then creates the accounting database if
// it is missing. false (not an error) while MariaDB is still starting.
StatusOr<bool> EnsureAccountingDatabase(const AccountingOptions& o);

// Whether slurmdbd answers (sacctmgr with `slurm_conf`); then registers
// `cluster` (slurm.conf's ClusterName) if it is not yet. false while slurmdbd is
// still starting.
StatusOr<bool> EnsureClusterRegistered(const AccountingOptions& o, const std::string& slurm_conf,
                                       const std::string& cluster);

// ClusterName= of a slurm.conf's text; "" when it has none.
std::string ClusterNameOf(const std::string& slurm_conf_text);

}  // namespace hpod::agent
