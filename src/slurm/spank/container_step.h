#pragma once

// pyxis's --container-* options, and a step's container as slurmstepd sees it.
//
// srun/sbatch (local, allocator): each option is validated as it is parsed, so a
// mistake is one line before anything is allocated. slurmstepd (remote), once per
// step and node, in user_init: ContainerStep::Start runs `hpod-container start`
// (the helper: image cache, mounts; it stays until the step ends and holds the
// container's mount namespace). In each task, before privileges drop:
// EnterTask joins that namespace, and TaskEnv is the image's environment to set;
// just before exec, EnterWorkdir. At the step's end, Stop.
//
// Thread contract: Slurm runs SPANK callbacks on one thread; a ContainerRequest and
// a ContainerStep are used from it only. EnterTask runs in a forked task.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::spank {

enum class ContainerOption {
  kImage,
  kMounts,
  kWorkdir,
  kName,
  kWritable,
  kReadonly,
  kEnv,
  kMountHome,
  kNoMountHome,
  kRemapRoot,
  kNoRemapRoot,
  kEntrypoint,
  kNoEntrypoint,
};

struct ContainerRequest {
  std::string image;
  std::string mounts;  // as given; validated
  std::string workdir;
  std::string name;
  bool writable = true;  // HyperPod's enroot.conf: ENROOT_ROOTFS_WRITABLE yes
  bool mount_home = false;
  bool remap_root = false;
  bool entrypoint = false;            // --container-entrypoint: run the image's ENTRYPOINT first
  std::vector<std::string> host_env;  // --container-env: the host's value wins

  // Whether the step runs in a container (an image, or a named one to reuse).
  bool Wanted() const { return !image.empty() || !name.empty(); }
};

// Applies one option; kInvalidArgument with the user's one line otherwise.
Status ApplyContainerOption(ContainerRequest& request, ContainerOption option,
                            std::string_view value);

struct StepIdentity {
  std::string job_id;
  std::string step_id;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string home;  // the user's home (passwd)
  bool allow_http = false;
};

// The helper's --spec: what `hpod-container start` reads.
// cache_max_bytes 0: the helper's default (half of the cache's filesystem).
std::string HelperSpec(const ContainerRequest& request, const StepIdentity& who,
                       const std::string& cache_dir, uint64_t cache_max_bytes = 0);

// The helper beside the plugin, or where `make install` puts it relative to the
// plugin (<prefix>/lib/hpod → <prefix>/bin), or in the build tree.
std::string FindHelper(const std::string& plugin_path);

class ContainerStep {
 public:
  ContainerStep() = default;
  ~ContainerStep() { Stop(); }
  ContainerStep(const ContainerStep&) = delete;
  ContainerStep& operator=(const ContainerStep&) = delete;

  // Runs the helper and waits for its one-line answer. The error is the helper's
  // one line (the image, the path, the fix).
  Status Start(const std::string& helper, const std::string& spec, const ContainerRequest& request);
  bool started() const { return ns_fd_ >= 0; }
  // In a task, as root: joins the container's mount namespace.
  Status EnterTask() const;
  // In a task, last: changes to the working directory in the container.
  Status EnterWorkdir() const;
  // The image's variables to set in each task, less those the user keeps (--container-env).
  const std::vector<std::pair<std::string, std::string>>& TaskEnv() const { return env_; }
  // In a task, last of all (as its user): with --container-entrypoint and an image
  // that has an ENTRYPOINT, execs it with the step's command as its arguments
  // (Docker's meaning) in place of slurmstepd's own exec of the command, which
  // skips what slurmstepd does after task_init (TaskProlog, --task-prolog, TMPDIR,
  // a debugger's attach); returns only on failure. OK without either.
  Status ExecEntrypoint(const std::vector<std::string>& command, char** env) const;
  // Lets the helper tear the container down, and reaps it.
  void Stop();

 private:
  pid_t helper_ = -1;
  int lifeline_ = -1;  // the helper's stdin: it tears down when this closes
  int ns_fd_ = -1;
  std::string workdir_;
  std::vector<std::string> entrypoint_;  // the image's, when --container-entrypoint
  std::vector<std::pair<std::string, std::string>> env_;
};

// A task (as its user, after privileges drop): --container-remap-root maps the
// user to root in a user namespace of its own. A no-op for root.
Status RemapRootInTask();

}  // namespace hpod::spank
