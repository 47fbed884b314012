// The extern "C" edge of the container options: one-line wrappers over
// container_step.h, each a try/catch.

#include "hpod/slurm/spank/container_bridge.h"

#include <dlfcn.h>
#include <pwd.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "hpod/container/image_store.h"
#include "hpod/slurm/spank/container_step.h"
#include "hpod/slurm/spank/supervisor.h"

namespace {

using namespace hpod::spank;  // NOLINT: a file of one-line wrappers

// One srun/slurmstepd handles one step: process-wide state, on Slurm's thread.
ContainerRequest& Request() {
  static ContainerRequest r;
  return r;
}
ContainerStep& Step() {
  static ContainerStep s;
  return s;
}
std::string& CacheDir() {
  static std::string d = hpod::container::kDefaultCacheDir;
  return d;
}
uint64_t& CacheMaxBytes() {
  static uint64_t b = 0;
  return b;
}

void SetErr(char* err, size_t errlen, const std::string& msg) {
  if (err == nullptr || errlen == 0) return;
  std::snprintf(err, errlen, "%s", msg.c_str());
}

std::string PluginPath() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&hpod_container_step_start), &info) != 0 &&
      info.dli_fname != nullptr) {
    return info.dli_fname;
  }
  return "";
}

}  // namespace

extern "C" void hpod_container_configure(int ac, char** av) {
  try {
    for (int i = 0; i < ac; ++i) {
      std::string a = av[i];
      if (a.rfind("container_cache=", 0) == 0) CacheDir() = a.substr(16);
      if (a.rfind("container_cache_max_gib=", 0) == 0) {
        CacheMaxBytes() = std::stoull(a.substr(24)) << 30;
      }
    }
  } catch (...) {
  }
}

extern "C" int hpod_container_option(int option, const char* value, int remote) {
  try {
    hpod::Status s =
        ApplyContainerOption(Request(), static_cast<ContainerOption>(option), value ? value : "");
    if (s.ok()) return 0;
    if (!remote) {
      StderrOutput out;
      out.Line("srun: error: " + s.message());
    }
    return -1;
  } catch (...) {
    return -1;
  }
}

extern "C" int hpod_container_step_start(unsigned int job_id, unsigned int step_id,
                                         unsigned int uid, unsigned int gid, int allow_http,
                                         char* err, size_t errlen) {
  try {
    // Slurm's special steps (batch, extern, interactive) sit at the top of the
    // range: the batch script runs on the node, and its sruns in the container.
    if (!Request().Wanted() || step_id >= 0xfffffff0u) return 0;
    StepIdentity who;
    who.job_id = std::to_string(job_id);
    who.step_id = std::to_string(step_id);
    who.uid = uid;
    who.gid = gid;
    who.allow_http = allow_http != 0;
    struct passwd pw, *found = nullptr;
    char buf[4096];
    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found != nullptr) {
      who.home = found->pw_dir;
    }
    const std::string spec = HelperSpec(Request(), who, CacheDir(), CacheMaxBytes());
    hpod::Status s = Step().Start(FindHelper(PluginPath()), spec, Request());
    if (s.ok()) return 0;
    SetErr(err, errlen, "hpod-container: " + s.message());
  } catch (const std::exception& e) {
    SetErr(err, errlen, std::string("hpod-container: ") + e.what());
  } catch (...) {
    SetErr(err, errlen, "hpod-container: failed");
  }
  return -1;
}

extern "C" int hpod_container_task_enter(char* err, size_t errlen) {
  try {
    hpod::Status s = Step().EnterTask();
    if (s.ok()) return 0;
    SetErr(err, errlen, "hpod-container: " + s.message());
  } catch (...) {
    SetErr(err, errlen, "hpod-container: joining the container failed");
  }
  return -1;
}

extern "C" int hpod_container_task_env_count(void) {
  return Step().started() ? static_cast<int>(Step().TaskEnv().size()) : 0;
}
extern "C" const char* hpod_container_task_env_name(int i) {
  return Step().TaskEnv()[static_cast<size_t>(i)].first.c_str();
}
extern "C" const char* hpod_container_task_env_value(int i) {
  return Step().TaskEnv()[static_cast<size_t>(i)].second.c_str();
}

extern "C" int hpod_container_task_user(char* err, size_t errlen) {
  try {
    if (!Step().started()) return 0;
    hpod::Status s = Request().remap_root ? RemapRootInTask() : hpod::OkStatus();
    if (s.ok()) s = Step().EnterWorkdir();
    if (s.ok()) return 0;
    SetErr(err, errlen, "hpod-container: " + s.message());
  } catch (...) {
    SetErr(err, errlen, "hpod-container: --container-remap-root failed");
  }
  return -1;
}

extern "C" int hpod_container_task_exec(int argc, char** argv, char** env, char* err,
                                        size_t errlen) {
  try {
    if (!Step().started()) return 0;
    std::vector<std::string> command(argv, argv + argc);
    hpod::Status s = Step().ExecEntrypoint(command, env);
    if (s.ok()) return 0;
    SetErr(err, errlen, "hpod-container: " + s.message());
  } catch (...) {
    SetErr(err, errlen, "hpod-container: --container-entrypoint failed");
  }
  return -1;
}

extern "C" void hpod_container_step_stop(void) {
  try {
    Step().Stop();
  } catch (...) {
  }
}

extern "C" void hpod_container_job_end(unsigned int job_id) {
  try {
    // The job's containers are plain directories by now: their mounts lived in
    // namespaces that ended with the steps.
    std::error_code ec;
    std::filesystem::remove_all(CacheDir() + "/containers/job-" + std::to_string(job_id), ec);
  } catch (...) {
  }
}
