#include "hpod/provider/local/node_host.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "hpod/base/crypto.h"
#include "hpod/base/subprocess.h"

namespace hpod::provider::local {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

constexpr auto kIpTimeout = 10s;

StatusOr<std::string> Ip(std::vector<std::string> args) {
  args.insert(args.begin(), "ip");
  return RunChecked(args, kIpTimeout);
}

bool LinkExists(const std::string& name) { return fs::exists("/sys/class/net/" + name); }

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Children of `parent` as the kernel lists them, or by scanning /proc when the
// kernel lacks CONFIG_PROC_CHILDREN.
std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  std::string p = std::to_string(parent);
  std::ifstream f("/proc/" + p + "/task/" + p + "/children");
  if (f) {
    pid_t c;
    while (f >> c) out.push_back(c);
    return out;
  }
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    char* end;
    long pid = ::strtol(e->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::string stat = ReadFile("/proc/" + std::string(e->d_name) + "/stat");
    size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream rest(stat.substr(paren + 2));
    std::string state;
    long ppid = 0;
    rest >> state >> ppid;
    if (ppid == parent) out.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(d);
  return out;
}

std::string Tail(const std::string& s, size_t n) {
  std::string t = s.size() > n ? s.substr(s.size() - n) : s;
  while (!t.empty() && t.back() == '\n') t.pop_back();
  return t;
}

}  // namespace

RealNodeHost::RealNodeHost() {
  // Probe once: without a time namespace nodes simply report the host's boot time.
  SubprocessOptions probe;
  probe.argv = {"unshare", "--time", "--fork", "true"};
  probe.timeout = 5s;
  auto r = RunCommand(probe);
  time_ns_ = r.ok() && r->exit_code == 0;
}

RealNodeHost::~RealNodeHost() {
  MutexLock lock(mu_);
  for (auto& h : holders_) h->Release();  // nodes outlive hpodd
}

std::optional<uint64_t> RealNodeHost::StartTimeOf(pid_t pid) {
  std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return std::nullopt;
  std::istringstream rest(stat.substr(paren + 2));
  std::string field;
  // Fields after the command: state is field 3, starttime field 22.
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return std::nullopt;
    if (i == 3 && (field == "Z" || field == "X")) return std::nullopt;
  }
  return std::stoull(field);
}

StatusOr<std::vector<std::string>> RealNodeHost::ListRoutes() {
  HPOD_ASSIGN_OR_RETURN(std::string out, Ip({"-4", "route", "show", "table", "main"}));
  std::vector<std::string> routes;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty()) routes.push_back(line);
  }
  return routes;
}

Status RealNodeHost::AddGuardRoute(const std::string& cidr) {
  return Ip({"route", "replace", "unreachable", cidr}).status();
}

Status RealNodeHost::DeleteGuardRoute(const std::string& cidr) {
  HPOD_ASSIGN_OR_RETURN(std::string out, Ip({"-4", "route", "show", "type", "unreachable"}));
  if (out.find(cidr) == std::string::npos) return OkStatus();
  return Ip({"route", "del", "unreachable", cidr}).status();
}

Status RealNodeHost::AddServiceAddress(const std::string& cidr) {
  return Ip({"addr", "replace", cidr, "dev", "lo"}).status();
}

Status RealNodeHost::DeleteServiceAddress(const std::string& cidr) {
  HPOD_ASSIGN_OR_RETURN(std::string out, Ip({"-4", "addr", "show", "dev", "lo"}));
  if (out.find(" " + cidr + " ") == std::string::npos) return OkStatus();
  return Ip({"addr", "del", cidr, "dev", "lo"}).status();
}

namespace {

// A fixed, locally administered MAC for bridge `name`. Without one, Linux gives a
// bridge the lowest MAC among its ports, so a killed node whose veth had it
// changes the gateway's MAC under every other node: their ARP entries go stale
// and their traffic through the gateway (network agents' channels to hpodd)
// stops for seconds, long enough to look like hung nodes.
std::string BridgeMac(const std::string& name) {
  const std::string h = HexEncode(Sha256("hpod-bridge:" + name));
  std::string mac = "02";
  for (int i = 0; i < 5; ++i) mac += ":" + h.substr(2 * i, 2);
  return mac;
}

}  // namespace

std::string NodeMac(const std::string& address) {
  const std::string h = HexEncode(Sha256("hpod-node:" + address.substr(0, address.find('/'))));
  std::string mac = "02";
  for (int i = 0; i < 5; ++i) mac += ":" + h.substr(2 * i, 2);
  return mac;
}

std::vector<std::vector<std::string>> AddressLookupRoutes(const NodeNetwork& net) {
  const std::string ip = net.address.substr(0, net.address.find('/'));
  const std::string& ns = net.netns;
  return {
      {"-n", ns, "rule", "add", "prio", "100", "lookup", "main", "suppress_prefixlength", "0"},
      {"-n", ns, "rule", "add", "prio", "101", "ipproto", "tcp", "unreachable"},
      {"-n", ns, "rule", "add", "prio", "102", "ipproto", "udp", "dport", "53", "unreachable"},
      {"-n", ns, "route", "replace", "default", "dev", "lo", "src", ip},
  };
}

Status RealNodeHost::CreateBridge(const std::string& name, const std::string& gateway) {
  if (!LinkExists(name)) HPOD_RETURN_IF_ERROR(Ip({"link", "add", name, "type", "bridge"}));
  HPOD_RETURN_IF_ERROR(Ip({"link", "set", name, "address", BridgeMac(name)}));
  HPOD_RETURN_IF_ERROR(Ip({"addr", "replace", gateway, "dev", name}));
  return Ip({"link", "set", name, "up"}).status();
}

Status RealNodeHost::DeleteBridge(const std::string& name) {
  if (!LinkExists(name)) return OkStatus();
  return Ip({"link", "del", name}).status();
}

Status RealNodeHost::CreateNodeNetwork(const NodeNetwork& net) {
  HPOD_RETURN_IF_ERROR(DeleteNodeNetwork(net.netns, net.veth_host));  // leftovers of a crash
  HPOD_RETURN_IF_ERROR(Ip({"netns", "add", net.netns}));
  HPOD_RETURN_IF_ERROR(
      Ip({"link", "add", net.veth_host, "type", "veth", "peer", "name", net.veth_node}));
  HPOD_RETURN_IF_ERROR(Ip({"link", "set", net.veth_node, "netns", net.netns}));
  HPOD_RETURN_IF_ERROR(Ip({"-n", net.netns, "link", "set", net.veth_node, "name", "eth0"}));
  HPOD_RETURN_IF_ERROR(
      Ip({"-n", net.netns, "link", "set", "eth0", "address", NodeMac(net.address)}));
  HPOD_RETURN_IF_ERROR(Ip({"-n", net.netns, "addr", "add", net.address, "dev", "eth0"}));
  HPOD_RETURN_IF_ERROR(Ip({"-n", net.netns, "link", "set", "lo", "up"}));
  HPOD_RETURN_IF_ERROR(Ip({"-n", net.netns, "link", "set", "eth0", "up"}));
  if (!net.service_address.empty()) {
    HPOD_RETURN_IF_ERROR(Ip({"-n", net.netns, "route", "replace", net.service_address + "/32",
                             "via", net.via, "dev", "eth0"}));
  }
  for (const std::vector<std::string>& args : AddressLookupRoutes(net)) {
    HPOD_RETURN_IF_ERROR(Ip(args));
  }
  return Ip({"link", "set", net.veth_host, "master", net.bridge, "up"}).status();
}

Status RealNodeHost::DeleteNodeNetwork(const std::string& netns, const std::string& veth_host) {
  if (NetnsExists(netns)) {
    HPOD_RETURN_IF_ERROR(Ip({"netns", "del", netns}));
    // The kernel destroys the netns (and with it the veth pair) asynchronously.
    for (int i = 0; i < 200 && LinkExists(veth_host); ++i) std::this_thread::sleep_for(5ms);
  }
  if (LinkExists(veth_host)) {
    Status s = Ip({"link", "del", veth_host}).status();
    if (!s.ok() && LinkExists(veth_host)) return s;  // else it vanished meanwhile
  }
  return OkStatus();
}

bool RealNodeHost::NetnsExists(const std::string& netns) {
  return fs::exists("/run/netns/" + netns);
}

StatusOr<ProcessId> RealNodeHost::SpawnNode(const NodeSpawn& spawn) {
  SubprocessOptions o;
  // nsenter (not `ip netns exec`, which remounts /sys) joins the netns and execs
  // unshare in place; unshare forks the node's PID 1.
  o.argv = {"nsenter",       "--net=/run/netns/" + spawn.netns,
            "unshare",       "--uts",
            "--mount",       "--pid",
            "--fork",        "--mount-proc",
            "--propagation", "private"};
  if (time_ns_) {
    // The node's boot time becomes its creation time (a replaced node looks rebooted).
    double uptime = 0;
    std::istringstream(ReadFile("/proc/uptime")) >> uptime;
    long offset = static_cast<long>(uptime) - 1;
    if (offset > 0) {
      o.argv.insert(o.argv.end(), {"--time", "--boottime", "-" + std::to_string(offset)});
    }
  }
  o.argv.insert(o.argv.end(), {spawn.init_binary, "--config", spawn.config_path});
  // A node starts from a clean environment, as a machine boots: nothing of
  // hpodd's (its secrets such as HPOD_S3_SECRET_ACCESS_KEY, its cwd, AWS_*) leaks in.
  o.clear_env = true;
  o.env = {{"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
           {"HOME", "/root"},
           {"LANG", "C.UTF-8"}};
  o.output_file = spawn.log_path;
  HPOD_ASSIGN_OR_RETURN(std::unique_ptr<Subprocess> holder, Subprocess::Start(o));
  pid_t holder_pid = holder->pid();
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (true) {
    std::vector<pid_t> children = ChildrenOf(holder_pid);
    if (!children.empty()) {
      auto start = StartTimeOf(children[0]);
      if (start) {
        MutexLock lock(mu_);
        holders_.push_back(std::move(holder));
        return ProcessId{children[0], *start};
      }
    }
    if (auto code = holder->Wait(0ms)) {
      return InternalError("starting node in netns " + spawn.netns + ": unshare exited with " +
                           std::to_string(*code) + ": " + Tail(ReadFile(spawn.log_path), 400));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      holder->Kill();
      return UnavailableError("starting node in netns " + spawn.netns +
                              ": its first process did not appear within 10 s");
    }
    std::this_thread::sleep_for(5ms);
  }
}

void RealNodeHost::ReapExited() {
  MutexLock lock(mu_);
  std::erase_if(holders_, [](std::unique_ptr<Subprocess>& h) { return h->Wait(0ms).has_value(); });
}

bool RealNodeHost::IsAlive(const ProcessId& id) {
  ReapExited();
  if (id.pid <= 0) return false;
  auto start = StartTimeOf(id.pid);
  return start && *start == id.start_time;
}

Status RealNodeHost::Kill(const ProcessId& id, std::chrono::milliseconds timeout) {
  if (!IsAlive(id)) return OkStatus();
  // Killing PID 1 of a pid namespace makes the kernel kill every process in it.
  if (::kill(id.pid, SIGKILL) != 0 && errno != ESRCH) {
    return InternalError("kill " + std::to_string(id.pid) + ": " + ::strerror(errno));
  }
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (IsAlive(id)) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return UnavailableError("node process " + std::to_string(id.pid) +
                              " still alive after SIGKILL");
    }
    std::this_thread::sleep_for(5ms);
  }
  return OkStatus();
}

std::string RealNodeHost::HostnameOf(const ProcessId& id) {
  if (!IsAlive(id)) return "";
  SubprocessOptions o;
  o.argv = {"nsenter", "-t", std::to_string(id.pid), "-u", "hostname"};
  o.timeout = 5s;
  auto r = RunCommand(o);
  if (!r.ok() || r->exit_code != 0) return "";
  std::string h = r->stdout_data;
  while (!h.empty() && (h.back() == '\n' || h.back() == ' ')) h.pop_back();
  return h;
}

// ---- FakeNodeHost ----

StatusOr<std::vector<std::string>> FakeNodeHost::ListRoutes() {
  MutexLock lock(mu_);
  calls_.push_back("ListRoutes");
  std::vector<std::string> out = routes_;
  for (const auto& g : guards_) out.push_back("unreachable " + g);
  // As the kernel shows a bridge's connected route: "10.77.0.0/24 dev hpbr0 ...".
  for (const auto& [name, gw] : bridge_gateways_) {
    size_t dot = gw.rfind('.');
    out.push_back(gw.substr(0, dot) + ".0/24 dev " + name + " proto kernel scope link src " +
                  gw.substr(0, gw.find('/')));
  }
  return out;
}

Status FakeNodeHost::AddGuardRoute(const std::string& cidr) {
  MutexLock lock(mu_);
  calls_.push_back("AddGuardRoute " + cidr);
  guards_.insert(cidr);
  return OkStatus();
}

Status FakeNodeHost::DeleteGuardRoute(const std::string& cidr) {
  MutexLock lock(mu_);
  calls_.push_back("DeleteGuardRoute " + cidr);
  guards_.erase(cidr);
  return OkStatus();
}

Status FakeNodeHost::AddServiceAddress(const std::string& cidr) {
  MutexLock lock(mu_);
  calls_.push_back("AddServiceAddress " + cidr);
  return OkStatus();
}

Status FakeNodeHost::DeleteServiceAddress(const std::string& cidr) {
  MutexLock lock(mu_);
  calls_.push_back("DeleteServiceAddress " + cidr);
  return OkStatus();
}

Status FakeNodeHost::CreateBridge(const std::string& name, const std::string& gateway) {
  MutexLock lock(mu_);
  calls_.push_back("CreateBridge " + name + " " + gateway);
  bridges_.insert(name);
  bridge_gateways_[name] = gateway;
  return OkStatus();
}

Status FakeNodeHost::DeleteBridge(const std::string& name) {
  MutexLock lock(mu_);
  calls_.push_back("DeleteBridge " + name);
  bridges_.erase(name);
  bridge_gateways_.erase(name);
  return OkStatus();
}

Status FakeNodeHost::CreateNodeNetwork(const NodeNetwork& net) {
  MutexLock lock(mu_);
  calls_.push_back("CreateNodeNetwork " + net.netns + " " + net.veth_host + " " + net.veth_node +
                   " " + net.bridge + " " + net.address +
                   (net.service_address.empty()
                        ? std::string()
                        : " route " + net.service_address + " via " + net.via));
  if (!bridges_.count(net.bridge)) return InternalError("bridge " + net.bridge + " missing");
  netns_.insert(net.netns);
  return OkStatus();
}

Status FakeNodeHost::DeleteNodeNetwork(const std::string& netns, const std::string& veth_host) {
  MutexLock lock(mu_);
  calls_.push_back("DeleteNodeNetwork " + netns + " " + veth_host);
  netns_.erase(netns);
  return OkStatus();
}

bool FakeNodeHost::NetnsExists(const std::string& netns) {
  MutexLock lock(mu_);
  return netns_.count(netns) > 0;
}

StatusOr<ProcessId> FakeNodeHost::SpawnNode(const NodeSpawn& spawn) {
  MutexLock lock(mu_);
  calls_.push_back("SpawnNode " + spawn.netns + " " + spawn.hostname);
  if (fail_next_spawn_) {
    fail_next_spawn_ = false;
    return InternalError("fake: spawn failed");
  }
  if (!netns_.count(spawn.netns)) return InternalError("netns " + spawn.netns + " missing");
  spawns_.push_back(spawn);
  ProcessId id{next_pid_++, static_cast<uint64_t>(next_pid_) * 7};
  processes_[id.pid] = {id, spawn.hostname};
  return id;
}

bool FakeNodeHost::IsAlive(const ProcessId& id) {
  MutexLock lock(mu_);
  auto it = processes_.find(id.pid);
  return it != processes_.end() && it->second.first == id;
}

Status FakeNodeHost::Kill(const ProcessId& id, std::chrono::milliseconds) {
  MutexLock lock(mu_);
  calls_.push_back("Kill " + std::to_string(id.pid));
  auto it = processes_.find(id.pid);
  if (it != processes_.end() && it->second.first == id) {
    processes_.erase(it);
    // As the kernel does when a pid namespace's PID 1 dies.
    std::erase_if(node_processes_, [&](const auto& kv) { return kv.second.first == id.pid; });
  }
  return OkStatus();
}

std::string FakeNodeHost::HostnameOf(const ProcessId& id) {
  MutexLock lock(mu_);
  auto it = processes_.find(id.pid);
  if (it == processes_.end() || !(it->second.first == id) || !hostnames_ready_) return "";
  return it->second.second;
}

void FakeNodeHost::SetRoutes(std::vector<std::string> routes) {
  MutexLock lock(mu_);
  routes_ = std::move(routes);
}
std::vector<std::string> FakeNodeHost::calls() const {
  MutexLock lock(mu_);
  return calls_;
}
void FakeNodeHost::ClearCalls() {
  MutexLock lock(mu_);
  calls_.clear();
}
void FakeNodeHost::SimulateDeath(pid_t pid) {
  MutexLock lock(mu_);
  processes_.erase(pid);
  node_processes_.erase(pid);
  std::erase_if(node_processes_, [&](const auto& kv) { return kv.second.first == pid; });
}
void FakeNodeHost::RemoveNetns(const std::string& netns) {
  MutexLock lock(mu_);
  netns_.erase(netns);
}
void FakeNodeHost::FailNextSpawn() {
  MutexLock lock(mu_);
  fail_next_spawn_ = true;
}
void FakeNodeHost::SetHostnamesReady(bool ready) {
  MutexLock lock(mu_);
  hostnames_ready_ = ready;
}
std::set<std::string> FakeNodeHost::bridges() const {
  MutexLock lock(mu_);
  return bridges_;
}
std::set<std::string> FakeNodeHost::netns() const {
  MutexLock lock(mu_);
  return netns_;
}
std::vector<NodeSpawn> FakeNodeHost::spawns() const {
  MutexLock lock(mu_);
  return spawns_;
}
size_t FakeNodeHost::live_processes() const {
  MutexLock lock(mu_);
  return processes_.size();
}

}  // namespace hpod::provider::local
