#include "hpod/agent/machine_facts.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>

#include "hpod/agent/fs_util.h"
#include "hpod/agent/health/nvml_api.h"
#include "hpod/base/subprocess.h"

namespace hpod::agent {
namespace {

using Json = nlohmann::json;

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

// PRETTY_NAME="Debian GNU/Linux 12 (bookworm)" → Debian GNU/Linux 12 (bookworm).
std::string OsName(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) return "";
  static const std::regex kPretty("(^|\n)PRETTY_NAME=\"?([^\"\n]*)\"?");
  std::smatch m;
  return std::regex_search(*text, m, kPretty) ? m[2].str() : "";
}

Json Disks(const std::string& sys_block) {
  Json out = Json::array();
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(sys_block, ec)) {
    const std::string name = entry.path().filename().string();
    // Loop, RAM and device-mapper devices are views of other disks.
    if (name.rfind("loop", 0) == 0 || name.rfind("ram", 0) == 0 || name.rfind("dm-", 0) == 0 ||
        name.rfind("zram", 0) == 0) {
      continue;
    }
    auto sectors = ReadFile((entry.path() / "size").string());
    if (!sectors.ok()) continue;
    Json d{{"name", name}};
    try {
      d["size_bytes"] = std::stoll(*sectors) * 512;  // always 512-byte units in sysfs
    } catch (const std::exception&) {
      continue;
    }
    if (auto rot = ReadFile((entry.path() / "queue/rotational").string()); rot.ok()) {
      d["rotational"] = Trimmed(*rot) == "1";
    }
    out.push_back(std::move(d));
  }
  return out;
}

Json Addresses() {
  Json out = Json::array();
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    if (a->ifa_addr == nullptr || a->ifa_addr->sa_family != AF_INET) continue;
    if ((a->ifa_flags & IFF_LOOPBACK) != 0) continue;
    char buf[INET_ADDRSTRLEN];
    auto* in = reinterpret_cast<sockaddr_in*>(a->ifa_addr);
    if (::inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf)) == nullptr) continue;
    out.push_back({{"interface", a->ifa_name}, {"ipv4", buf}});
  }
  ::freeifaddrs(list);
  return out;
}

// Each GPU's name, UUID and memory, through NVML; none without it.
Json Gpus(const std::string& library) {
  Json out = Json::array();
  void* h = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return out;
  auto init = reinterpret_cast<nvmlInit_v2_fn>(::dlsym(h, "nvmlInit_v2"));
  auto shutdown = reinterpret_cast<nvmlShutdown_fn>(::dlsym(h, "nvmlShutdown"));
  auto count_fn = reinterpret_cast<nvmlDeviceGetCount_v2_fn>(::dlsym(h, "nvmlDeviceGetCount_v2"));
  auto handle_fn = reinterpret_cast<nvmlDeviceGetHandleByIndex_v2_fn>(
      ::dlsym(h, "nvmlDeviceGetHandleByIndex_v2"));
  auto name_fn = reinterpret_cast<nvmlDeviceGetName_fn>(::dlsym(h, "nvmlDeviceGetName"));
  auto uuid_fn = reinterpret_cast<nvmlDeviceGetUUID_fn>(::dlsym(h, "nvmlDeviceGetUUID"));
  auto mem_fn = reinterpret_cast<nvmlDeviceGetMemoryInfo_fn>(::dlsym(h, "nvmlDeviceGetMemoryInfo"));
  unsigned int count = 0;
  if (init != nullptr && count_fn != nullptr && handle_fn != nullptr &&
      init() == health::nvml::kSuccess) {
    if (count_fn(&count) == health::nvml::kSuccess) {
      for (unsigned int i = 0; i < count; ++i) {
        nvmlDevice_t dev = nullptr;
        if (handle_fn(i, &dev) != health::nvml::kSuccess) continue;
        Json g{{"index", i}};
        char buf[96] = {};
        if (name_fn != nullptr && name_fn(dev, buf, sizeof(buf)) == health::nvml::kSuccess) {
          g["name"] = buf;
        }
        char uuid[96] = {};
        if (uuid_fn != nullptr && uuid_fn(dev, uuid, sizeof(uuid)) == health::nvml::kSuccess) {
          g["uuid"] = uuid;
        }
        nvmlMemory_t mem{};
        if (mem_fn != nullptr && mem_fn(dev, &mem) == health::nvml::kSuccess) {
          g["memory_bytes"] = mem.total;
        }
        out.push_back(std::move(g));
      }
    }
    if (shutdown != nullptr) shutdown();
  }
  ::dlclose(h);
  return out;
}

// "slurm 22.05.8" (upstream) or "slurm-wlm 22.05.8" (Debian's build) → "22.05.8",
// the last word; "" when slurmd is not installed.
std::string SlurmVersion(const std::string& slurmd) {
  SubprocessOptions o;
  o.argv = {slurmd, "-V"};
  o.timeout = std::chrono::seconds(5);
  auto r = RunCommand(o);
  if (!r.ok() || r->exit_code != 0) return "";
  std::string v = Trimmed(r->stdout_data);
  if (auto space = v.find_last_of(" \t\n"); space != std::string::npos) v = v.substr(space + 1);
  return v;
}

}  // namespace

std::string MachineHostname() {
  char name[256] = {};
  return ::gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string();
}

StatusOr<Json> CollectMachineFacts(const FactsOptions& options) {
  auto id = ReadFile(options.machine_id_file);
  std::string machine_id = id.ok() ? Trimmed(*id) : "";
  static const std::regex kMachineId("^[0-9a-f]{32}$");
  if (!std::regex_match(machine_id, kMachineId)) {
    return FailedPreconditionError(
        options.machine_id_file + (id.ok() ? " does not hold a machine id" : " cannot be read") +
        " (32 lowercase hex characters); run systemd-machine-id-setup to make one");
  }
  Json f;
  f["machine_id"] = machine_id;
  if (std::string boot = ReadBootId(options.boot_id_file); !boot.empty()) f["boot_id"] = boot;
  if (std::string host = MachineHostname(); !host.empty()) f["hostname"] = host;
  f["cpus"] = static_cast<int64_t>(::sysconf(_SC_NPROCESSORS_ONLN));
  f["memory_bytes"] = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) *
                      static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
  f["gpus"] = Gpus(options.nvml_library);
  f["disks"] = Disks(options.sys_block_dir);
  f["addresses"] = Addresses();
  if (std::string os = OsName(options.os_release_file); !os.empty()) f["os"] = os;
  if (std::string v = SlurmVersion(options.slurmd); !v.empty()) f["slurm_version"] = v;
  return f;
}

}  // namespace hpod::agent
