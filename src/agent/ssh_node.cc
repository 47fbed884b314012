#include "hpod/agent/ssh_node.h"

#include <sys/stat.h>

#include <filesystem>
#include <sstream>

#include "hpod/agent/fs_util.h"
#include "hpod/base/ssh_key.h"

namespace hpod::agent {

namespace fs = std::filesystem;

namespace {

StatusOr<bool> WriteIfDiffers(const std::string& path, const std::string& data, mode_t mode) {
  auto old = ReadFile(path);
  struct stat st;
  if (old.ok() && *old == data && ::stat(path.c_str(), &st) == 0 && (st.st_mode & 07777) == mode) {
    return false;
  }
  HPOD_RETURN_IF_ERROR(WriteFileAtomic(path, data, mode));
  return true;
}

constexpr char kSshdConfigRest[] =
    "# Host-based trust between the nodes: /etc/ssh/shosts.equiv for users, root's\n"
    "# ~/.shosts for root (sshd never reads shosts.equiv for root).\n"
    "HostbasedAuthentication yes\n"
    "IgnoreRhosts shosts-only\n"
    "PermitRootLogin prohibit-password\n"
    "PubkeyAuthentication yes\n"
    "PasswordAuthentication no\n"
    "KbdInteractiveAuthentication no\n"
    "UsePAM yes\n"
    "PrintMotd no\n"
    "AcceptEnv LANG LC_*\n"
    "Subsystem sftp /usr/lib/openssh/sftp-server\n";

std::string SshdConfig(const std::string& ssh_dir) {
  return "# hpod's sshd for SSH between the cluster's nodes (docs/ssh.md). The agent\n"
         "# rewrites this file; put your own settings in sshd_config.d/*.conf, read first.\n"
         "Include " +
         ssh_dir +
         "/sshd_config.d/*.conf\n"
         "# The address is on sshd's command line: the node's cluster address only.\n"
         "HostKey " +
         ssh_dir + "/ssh_host_ed25519_key\n" + kSshdConfigRest;
}

constexpr char kClientConfig[] =
    "# hpod: SSH between the cluster's nodes authenticates the node (docs/ssh.md).\n"
    "Host *\n"
    "    HostbasedAuthentication yes\n"
    "    EnableSSHKeysign yes\n";

}  // namespace

StatusOr<bool> WriteSshSetup(const SshPaths& p, const std::string& host_key,
                             const std::string& known_hosts) {
  HPOD_ASSIGN_OR_RETURN(std::string pub, SshPublicKeyOf(host_key));
  // known_hosts lines are "name,address key-type key"; both files of trusted
  // hosts list each name and address once per line.
  std::string equiv;
  std::istringstream lines(known_hosts);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    std::string hosts, type, key, extra;
    if (!(fields >> hosts >> type >> key) || (fields >> extra) || type != "ssh-ed25519" ||
        hosts.find_first_of("*?!#") != std::string::npos) {
      return InvalidArgumentError("ssh_known_hosts has a bad line '" + line + "'");
    }
    std::istringstream names(hosts);
    std::string name;
    while (std::getline(names, name, ',')) equiv += name + "\n";
  }
  std::error_code ec;
  for (const std::string& dir :
       {p.ssh_dir + "/sshd_config.d", p.ssh_dir + "/ssh_config.d", p.run_dir + "/sshd"}) {
    fs::create_directories(dir, ec);
    if (ec) return InternalError("creating " + dir + ": " + ec.message());
  }
  ::chmod((p.run_dir + "/sshd").c_str(), 0755);
  for (const char* other : {"rsa", "ecdsa", "dsa"}) {
    for (const char* suffix : {"", ".pub"}) {
      fs::remove(p.ssh_dir + "/ssh_host_" + other + "_key" + suffix, ec);
    }
  }
  HPOD_ASSIGN_OR_RETURN(bool key_changed,
                        WriteIfDiffers(p.ssh_dir + "/ssh_host_ed25519_key", host_key, 0600));
  HPOD_RETURN_IF_ERROR(
      WriteIfDiffers(p.ssh_dir + "/ssh_host_ed25519_key.pub", pub + "\n", 0644).status());
  HPOD_RETURN_IF_ERROR(WriteIfDiffers(p.ssh_dir + "/ssh_known_hosts", known_hosts, 0644).status());
  HPOD_RETURN_IF_ERROR(WriteIfDiffers(p.ssh_dir + "/shosts.equiv", equiv, 0644).status());
  HPOD_RETURN_IF_ERROR(WriteIfDiffers(p.root_home + "/.shosts", equiv, 0600).status());
  HPOD_RETURN_IF_ERROR(
      WriteIfDiffers(p.ssh_dir + "/" + kSshdConfigName, SshdConfig(p.ssh_dir), 0644).status());
  HPOD_RETURN_IF_ERROR(
      WriteIfDiffers(p.ssh_dir + "/ssh_config.d/hpod.conf", kClientConfig, 0644).status());
  return key_changed;
}

std::vector<std::string> SshdArgv(const std::string& sshd, const SshPaths& p,
                                  const std::string& listen_address) {
  return {sshd,
          "-D",
          "-e",
          "-f",
          p.ssh_dir + "/" + kSshdConfigName,
          "-o",
          "ListenAddress=" + listen_address};
}

}  // namespace hpod::agent
