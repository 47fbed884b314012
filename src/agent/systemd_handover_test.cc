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
// <unit>.enabled, <unit>.loaded (a stop fails while <unit>.stop-fails exists);
// every call is a line of <state>/calls.
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
  stop) [[ -e $state/$unit.stop-fails ]] && { echo "Job for $unit failed" >&2; exit 1; }
        rm -f "$state/$unit.active" ;;
  enable) touch "$state/$unit.enabled" ;;
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
  Machine("slurmctld", false, true);
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
  const std::string remembered = *ReadFile(o_.state_file);
  ASSERT_TRUE(HandOverUnits(o_).ok());
  calls = Calls();
  EXPECT_EQ(Count(calls, "stop munge.service"), 0u);
  EXPECT_EQ(Count(calls, "is-active munge.service"), 0u);
  EXPECT_EQ(*ReadFile(o_.state_file), remembered);

  // The tenure: a script enabled slurmd and disabled slurmctld; hpod's munge
  // runs under the unit.
  Touch("slurmd.enabled");
  fs::remove(tmp_ / "state/slurmctld.enabled");
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
  EXPECT_EQ(Count(calls, "enable slurmctld.service"), 1u) << "disabled during the tenure";
  EXPECT_EQ(Count(calls, "disable munge.service"), 0u) << "enabled before it";
  EXPECT_EQ(Count(calls,
                  "reset-failed munge.service slurmdbd.service slurmctld.service "
                  "slurmd.service"),
            1u)
      << "the handed units' failures only";
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

TEST_F(SystemdHandoverTest, AHandoverThatFailsHalfWayStillKnowsWhatToGiveBack) {
  Machine("munge", /*active=*/true, /*enabled=*/true);
  Touch("munge.stop-fails");
  EXPECT_FALSE(HandOverUnits(o_).ok());
  EXPECT_TRUE(Has("munge.active"));
  fs::remove(tmp_ / "state/munge.stop-fails");
  ASSERT_TRUE(HandOverUnits(o_).ok());
  EXPECT_FALSE(Has("munge.active"));
  EXPECT_EQ(Count(Calls(), "daemon-reload"), 1u);
  ASSERT_TRUE(ReturnUnits(o_).ok());
  EXPECT_TRUE(Has("munge.active")) << "it ran before the first try";
}

TEST_F(SystemdHandoverTest, NoProgramPathNoHandover) {
  o_.agent_program = "";
  EXPECT_EQ(HandOverUnits(o_).code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(fs::is_empty(tmp_ / "etc"));
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
    Serve();
    notify_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = tmp_ / "notify";
    std::strcpy(addr.sun_path, path.c_str());
    ASSERT_EQ(::bind(notify_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
    ::setenv("MAINPID", "4242", 1);  // as systemd sets it for ExecStop
  }
  void TearDown() override {
    ::unsetenv("NOTIFY_SOCKET");
    ::unsetenv("MAINPID");
    ::close(notify_);
    if (server_) server_->Stop();
  }
  // The fake agent: starts and stops one slurmd, whose output is log_.
  void Serve() {
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
            stopped_ = false;
            std::ofstream(log_, std::ios::app) << "slurmd started\n";
          }
          if (r->verb == UnitVerb::kStop) active_ = "inactive", stopped_ = true;
          UnitState s;
          s.name = r->units.at(0);
          s.active = active_;
          s.stopped = stopped_;
          s.logs = {tmp_ / "slurmd.logfile", log_};
          return UnitsAnswer({s});
        });
    ASSERT_TRUE(server_->Start().ok());
  }
  void Set(const std::string& active) {
    std::lock_guard<std::mutex> lock(mu_);
    active_ = active;
  }
  std::vector<std::string> Verbs() {
    std::lock_guard<std::mutex> lock(mu_);
    return verbs_;
  }
  int Run(std::vector<std::string> args) {
    args.insert(args.begin(), {"hpod-agent", "systemd-unit"});
    args.insert(args.end(), {"--socket", socket_});
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    return SystemdUnitMain(static_cast<int>(argv.size()), argv.data());
  }
  // The next datagram to systemd's notify socket, waiting up to 2 s.
  std::string Notified() {
    for (int i = 0; i < 100; ++i) {
      char buf[512];
      ssize_t n = ::recv(notify_, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) return std::string(buf, static_cast<size_t>(n));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "";
  }

  testing::TempDir tmp_;
  std::string socket_, log_;
  std::unique_ptr<LocalSocketServer> server_;
  std::mutex mu_;
  std::vector<std::string> verbs_;
  std::string active_ = "inactive";
  bool stopped_ = false;
  int notify_ = -1;
};

TEST_F(SystemdUnitTest, StartIsReadyThenCopiesTheOutputUntilAStop) {
  ::testing::internal::CaptureStdout();
  std::atomic<int> rc{-1};
  std::thread follower([&] { rc = Run({"start", "slurmd.service"}); });
  const std::string ready = Notified();
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
  EXPECT_EQ(Verbs().at(1), "start");
}

TEST_F(SystemdUnitTest, AnAgentThatRestartsDoesNotEndTheUnit) {
  std::atomic<int> rc{-1};
  std::thread follower([&] { rc = Run({"start", "slurmd"}); });
  ASSERT_EQ(Notified().rfind("READY=1\n", 0), 0u);
  // The agent goes away, then comes back without its role yet: slurmd reads
  // inactive, but no stop asked for that.
  server_->Stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  Set("inactive");
  Serve();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(rc.load(), -1);
  // Its main process ended by itself: systemd's ExecStop then has no $MAINPID,
  // and stops nothing.
  ::unsetenv("MAINPID");
  const size_t asked = Verbs().size();
  EXPECT_EQ(Run({"stop", "slurmd"}), 0);
  const std::vector<std::string> verbs = Verbs();
  for (size_t i = asked; i < verbs.size(); ++i) EXPECT_NE(verbs[i], "stop");
  ::setenv("MAINPID", "4242", 1);
  EXPECT_EQ(Run({"stop", "slurmd"}), 0);
  follower.join();
  EXPECT_EQ(rc.load(), 0);
}

TEST_F(SystemdUnitTest, ADaemonHpodRunsIsFollowedNotStarted) {
  Set("active");
  std::atomic<int> rc{-1};
  std::thread follower([&] { rc = Run({"start", "slurmd"}); });
  ASSERT_EQ(Notified().rfind("READY=1\n", 0), 0u);
  EXPECT_EQ(Run({"stop", "slurmd"}), 0);
  follower.join();
  for (const std::string& v : Verbs()) EXPECT_NE(v, "start") << "no start pins hpod's daemon";
}

TEST_F(SystemdUnitTest, WithoutAnAgentItIsReadyAtOnceAndStartsWhenTheAgentComes) {
  server_->Stop();
  server_.reset();
  std::atomic<int> rc{-1};
  std::thread follower([&] { rc = Run({"start", "slurmd"}); });
  EXPECT_EQ(Notified(), "READY=1\nSTATUS=waiting for the hpod agent") << "boot goes on";
  Serve();
  for (int i = 0; i < 150 && Verbs().size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GE(Verbs().size(), 2u);
  EXPECT_EQ(Verbs().at(1), "start");
  EXPECT_EQ(Run({"stop", "slurmd"}), 0);
  follower.join();
  EXPECT_EQ(rc.load(), 0);
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
