#include "hpod/agent/systemd_handover.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "hpod/agent/fs_util.h"
#include "hpod/agent/local_socket.h"
#include "hpod/agent/systemd_unit.h"
#include "hpod/agent/test_util.h"
#include "hpod/agent/units.h"

namespace hpod::agent {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A systemctl that keeps the machine's units as files: <state>/<unit>.active,
// <unit>.enabled, <unit>.loaded; every call is a line of <state>/calls.
constexpr char kFakeSystemctl[] = R"(#!/bin/bash
state=$(dirname "$0")/state
echo "$*" >>"$state/calls"
verb=$1; shift
[[ $1 == -p ]] && { prop=$2; shift 3; }
unit=${1%.service}
case $verb in
  is-active) [[ -e $state/$unit.active ]] && { echo active; exit 0; }; echo inactive; exit 3 ;;
  is-enabled) [[ -e $state/$unit.enabled ]] && { echo enabled; exit 0; }; echo disabled; exit 1 ;;
  start) touch "$state/$unit.active" ;;
  stop) rm -f "$state/$unit.active" ;;
  disable) rm -f "$state/$unit.enabled" ;;
  show) [[ -e $state/$unit.loaded ]] && echo loaded || echo not-found ;;
  daemon-reload|reset-failed) ;;
  *) echo "unexpected: $verb" >&2; exit 1 ;;
esac
)";

class SystemdHandoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(tmp_ / "state");
    fs::create_directories(tmp_ / "etc");
    ASSERT_TRUE(WriteFileAtomic(tmp_ / "systemctl", kFakeSystemctl, 0755).ok());
    o_.unit_dir = tmp_ / "etc";
    o_.systemctl = tmp_ / "systemctl";
    o_.agent_program = "/usr/bin/hpod-agent";
    o_.socket = "/run/hpod-agent/agent.sock";
    o_.state_file = tmp_ / "tenure/systemd-units";
  }
  void Machine(const std::string& unit, bool active, bool enabled) {
    Touch(unit + ".loaded");
    if (active) Touch(unit + ".active");
    if (enabled) Touch(unit + ".enabled");
  }
  void Touch(const std::string& name) {
    ASSERT_TRUE(WriteFileAtomic(tmp_ / ("state/" + name), "", 0644).ok());
  }
  bool Has(const std::string& name) { return fs::exists(tmp_ / ("state/" + name)); }
  std::vector<std::string> Calls() {
    std::vector<std::string> out;
    std::ifstream in(tmp_ / "state/calls");
    for (std::string line; std::getline(in, line);) out.push_back(line);
    fs::remove(tmp_ / "state/calls");
    return out;
  }
  static size_t Count(const std::vector<std::string>& calls, const std::string& call) {
    return std::count(calls.begin(), calls.end(), call);
  }
  std::string Etc(const std::string& path) {
    auto text = ReadFile(tmp_ / ("etc/" + path));
    return text.ok() ? *text : "";
  }

  testing::TempDir tmp_;
  SystemdHandoverOptions o_;
};

TEST_F(SystemdHandoverTest, TheDropInAsksTheAgentAndResetsWhatWouldActOnTheDaemon) {
  const std::string d = HandoverDropIn("slurmd", o_);
  EXPECT_EQ(d.rfind("# hpod-agent tenure:", 0), 0u) << "the marker ReturnUnits removes by";
  for (const char* line :
       {"ConditionPathExists=\n", "Type=notify\n", "User=root\n", "RuntimeDirectory=\n",
        "PIDFile=\n", "Restart=no\n",
        "ExecStart=\nExecStart=/usr/bin/hpod-agent systemd-unit "
        "start slurmd --socket /run/hpod-agent/agent.sock\n",
        "ExecStop=\nExecStop=/usr/bin/hpod-agent systemd-unit stop slurmd --socket "
        "/run/hpod-agent/agent.sock\n",
        "ExecReload=\nExecReload=/usr/bin/hpod-agent systemd-unit reload slurmd"}) {
    EXPECT_NE(d.find(line), std::string::npos) << line << " in\n" << d;
  }
}

TEST_F(SystemdHandoverTest, TheMachinesMungeStepsAsideAndComesBackWithTheHostAsItWas) {
  Machine("munge", /*active=*/true, /*enabled=*/true);
  Machine("slurmd", false, false);  // Debian's slurmd package: installed, not running
  ASSERT_TRUE(WriteFileAtomic(tmp_ / "etc/slurmctld.service", "mine\n", 0644).ok());
  ASSERT_TRUE(HandOverUnits(o_).ok());
  auto calls = Calls();
  EXPECT_EQ(Count(calls, "stop munge.service"), 1u);
  EXPECT_EQ(Count(calls, "stop slurmd.service"), 0u) << "it did not run";
  EXPECT_EQ(Count(calls, "daemon-reload"), 1u);
  for (std::string_view u : kHandedUnits) {
    const std::string unit(u);
    EXPECT_EQ(Etc(unit + ".service.d/50-hpod-agent.conf"), HandoverDropIn(unit, o_)) << unit;
  }
  // HyperPod's AMI files where none is; the admin's own slurmctld.service stays.
  EXPECT_NE(Etc("slurmd.service").find("ExecStart=/usr/sbin/slurmd -D -s $SLURMD_OPTIONS"),
            std::string::npos);
  EXPECT_EQ(Etc("slurmctld.service"), "mine\n");
  EXPECT_FALSE(fs::exists(tmp_ / "etc/munge.service")) << "the machine has one";

  // An agent restart (or a reboot) mid-tenure: nothing stopped or remembered again.
  ASSERT_TRUE(HandOverUnits(o_).ok());
  calls = Calls();
  EXPECT_EQ(Count(calls, "stop munge.service"), 0u);
  EXPECT_EQ(Count(calls, "daemon-reload"), 0u);

  // The tenure: a script enabled slurmd, hpod's munge runs under the unit.
  Touch("slurmd.enabled");
  Touch("munge.active");
  ASSERT_TRUE(WriteFileAtomic(tmp_ / "etc/slurmd.service",
                              "# hpod-agent tenure: as start_slurm.sh's envsubst leaves it\n", 0644)
                  .ok());
  // The package's own unit, copied here by an admin, is not the tenure's.
  ASSERT_TRUE(WriteFileAtomic(tmp_ / "etc/hpod-agent.service",
                              "# hpod-agent: this machine as a host of an hpod pool\n", 0644)
                  .ok());
  ASSERT_TRUE(WriteFileAtomic(tmp_ / "etc/slurmd_DO_NOT_START_ON_CONTROLLER.service",
                              "# hpod-agent tenure: moved aside by start_slurm.sh\n", 0644)
                  .ok());
  ASSERT_TRUE(ReturnUnits(o_).ok());
  calls = Calls();
  EXPECT_FALSE(fs::exists(tmp_ / "etc/slurmd_DO_NOT_START_ON_CONTROLLER.service"));
  EXPECT_EQ(Count(calls, "disable slurmd.service"), 1u) << "enabled during the tenure";
  EXPECT_EQ(Count(calls, "disable munge.service"), 0u) << "enabled before it";
  EXPECT_EQ(calls.back(), "start munge.service") << "running before it";
  EXPECT_TRUE(Has("munge.active"));
  EXPECT_FALSE(fs::exists(tmp_ / "etc/slurmd.service.d"));
  EXPECT_FALSE(fs::exists(tmp_ / "etc/slurmd.service")) << "hpod's, even rewritten";
  EXPECT_EQ(Etc("slurmctld.service"), "mine\n");
  EXPECT_TRUE(fs::exists(tmp_ / "etc/hpod-agent.service"));
  EXPECT_FALSE(fs::exists(o_.state_file));
  // Idempotent: a second end does nothing.
  ASSERT_TRUE(ReturnUnits(o_).ok());
  EXPECT_TRUE(Calls().empty());
}

TEST_F(SystemdHandoverTest, AMachineWithoutMungeGetsABareUnitThatLeavesWithTheTenure) {
  ASSERT_TRUE(HandOverUnits(o_).ok());
  EXPECT_NE(Etc("munge.service").find("Description=MUNGE authentication service"),
            std::string::npos);
  ASSERT_TRUE(ReturnUnits(o_).ok());
  EXPECT_FALSE(fs::exists(tmp_ / "etc/munge.service"));
  EXPECT_TRUE(fs::is_empty(tmp_ / "etc"));
}

// The follower a handed unit runs, against a fake agent.
class SystemdUnitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = tmp_ / "agent.sock";
    log_ = tmp_ / "slurmd.log";
    ASSERT_TRUE(WriteFileAtomic(log_, "before the start\n", 0644).ok());
    server_ = std::make_unique<LocalSocketServer>(
        socket_, [this](const json& request, uid_t) -> StatusOr<json> {
          auto r = UnitRequest::FromJson(request);
          if (!r.ok()) return r.status();
          std::lock_guard<std::mutex> lock(mu_);
          verbs_.push_back(std::string(UnitVerbName(r->verb)));
          if (r->units.at(0) == "slurmctld") {
            return FailedPreconditionError("slurmctld runs on the controller only");
          }
          if (r->verb == UnitVerb::kStart) {
            active_ = "active";
            std::ofstream(log_, std::ios::app) << "slurmd started\n";
          }
          if (r->verb == UnitVerb::kStop) active_ = "inactive";
          UnitState s;
          s.name = r->units.at(0);
          s.active = active_;
          s.logs = {tmp_ / "slurmd.logfile", log_};
          return UnitsAnswer({s});
        });
    ASSERT_TRUE(server_->Start().ok());
    notify_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = tmp_ / "notify";
    std::strcpy(addr.sun_path, path.c_str());
    ASSERT_EQ(::bind(notify_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("NOTIFY_SOCKET");
    ::close(notify_);
    if (server_) server_->Stop();
  }
  int Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"hpod-agent", "systemd-unit"});
    args.insert(args.end(), {"--socket", socket_});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return SystemdUnitMain(static_cast<int>(argv.size()), argv.data());
  }
  std::string Notified() {
    char buf[512];
    ssize_t n = ::recv(notify_, buf, sizeof(buf), MSG_DONTWAIT);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

  testing::TempDir tmp_;
  std::string socket_, log_;
  std::unique_ptr<LocalSocketServer> server_;
  std::mutex mu_;
  std::vector<std::string> verbs_;
  std::string active_ = "inactive";
  int notify_ = -1;
};

TEST_F(SystemdUnitTest, StartIsReadyThenCopiesTheLogUntilTheAgentStopsIt) {
  ::testing::internal::CaptureStdout();
  std::atomic<int> rc{-1};
  std::thread follower([&] { rc = Run({"start", "slurmd.service"}); });
  // READY=1 once the agent answered the start.
  std::string ready;
  for (int i = 0; i < 100 && ready.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ready = Notified();
  }
  EXPECT_EQ(ready.rfind("READY=1\n", 0), 0u) << ready;
  std::ofstream(log_, std::ios::app) << "a line while it runs\n";
  std::ofstream(tmp_ / "slurmd.logfile", std::ios::app) << "its log file stays a file\n";
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(rc.load(), -1) << "it stays while the daemon runs";
  EXPECT_EQ(Run({"stop", "slurmd"}), 0);  // ExecStop
  follower.join();
  EXPECT_EQ(rc.load(), 0);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_EQ(out, "slurmd started\na line while it runs\n") << "the journal gets what came after";
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(verbs_.at(1), "start");
  EXPECT_EQ(verbs_.back(), "query");
}

TEST_F(SystemdUnitTest, RefusalsFailTheUnitAndAStopWithoutAnAgentHasNothingToDo) {
  EXPECT_EQ(Run({"start", "slurmctld"}), 1);
  EXPECT_EQ(Run({"start", "docker"}), 2);
  EXPECT_EQ(Run({"restart", "slurmd"}), 2);
  server_->Stop();
  server_.reset();
  EXPECT_EQ(Run({"stop", "slurmd"}), 0);
  EXPECT_EQ(Run({"reload", "slurmd"}), 1);
}

}  // namespace
}  // namespace hpod::agent
