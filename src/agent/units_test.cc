#include "hpod/agent/units.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>

#include "hpod/agent/fs_util.h"
#include "hpod/agent/local_socket.h"
#include "hpod/agent/systemctl_shim.h"
#include "hpod/agent/test_util.h"

namespace hpod::agent {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

TEST(UnitsTest, NamesAliasesAndSuffixes) {
  EXPECT_EQ(CanonicalUnit("slurmd.service"), "slurmd");
  EXPECT_EQ(CanonicalUnit("slurmctld"), "slurmctld");
  EXPECT_EQ(CanonicalUnit("ssh"), "sshd");
  EXPECT_EQ(CanonicalUnit("ssh.service"), "sshd");
  EXPECT_EQ(CanonicalUnit("mysql"), "mariadb");
  EXPECT_EQ(CanonicalUnit("mysqld.service"), "mariadb");
  EXPECT_EQ(CanonicalUnit("munged"), "munge");
  EXPECT_EQ(CanonicalUnit("docker"), std::nullopt);
  EXPECT_EQ(CanonicalUnit(".service"), std::nullopt);
  EXPECT_EQ(CanonicalUnit("slurmd.socket"), std::nullopt);
}

TEST(UnitsTest, RequestRoundTripsAndRefusesWhatTheAgentDoesNotRun) {
  UnitRequest r;
  r.verb = UnitVerb::kEnable;
  r.units = {"slurmd"};
  r.now = true;
  r.wait_ms = 5000;
  auto back = UnitRequest::FromJson(r.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->verb, UnitVerb::kEnable);
  EXPECT_EQ(back->units, std::vector<std::string>{"slurmd"});
  EXPECT_TRUE(back->now);
  EXPECT_EQ(back->wait_ms, 5000);

  // Aliases are folded, duplicates dropped.
  auto folded = UnitRequest::FromJson(
      json{{"units_request", {{"verb", "stop"}, {"units", {"ssh", "sshd.service"}}}}});
  ASSERT_TRUE(folded.ok());
  EXPECT_EQ(folded->units, std::vector<std::string>{"sshd"});

  auto unknown =
      UnitRequest::FromJson(json{{"units_request", {{"verb", "start"}, {"units", {"docker"}}}}});
  EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(unknown.status().message(), "Unit docker.service not found.");
  EXPECT_FALSE(UnitRequest::FromJson(json{{"units_request", {{"verb", "reboot"}}}}).ok());
  EXPECT_FALSE(UnitRequest::FromJson(json{{"units_request", {{"verb", "start"}}}}).ok())
      << "start needs a unit";
  EXPECT_TRUE(UnitRequest::FromJson(json{{"units_request", {{"verb", "query"}}}}).ok())
      << "a query without units asks for all";
  EXPECT_FALSE(UnitRequest::FromJson(json{{"op", "job_health"}}).ok());
}

TEST(UnitsTest, StateRoundTrips) {
  UnitState s;
  s.name = "slurmctld";
  s.description = "Slurm controller daemon";
  s.active = "active";
  s.sub = "running";
  s.enabled = false;
  s.pid = 42;
  s.since = 1700000000.5;
  s.message = "m";
  s.stopped = true;
  s.logs = {"/var/log/slurm/slurmctld.log"};
  auto back = UnitState::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, s);
  EXPECT_EQ(UnitsAnswer({s})["units"][0]["name"], "slurmctld");
}

TEST(SystemctlShimTest, TheNamesItAnswersTo) {
  EXPECT_TRUE(IsSystemctlName("/usr/local/bin/systemctl"));
  EXPECT_TRUE(IsSystemctlName("journalctl"));
  EXPECT_FALSE(IsSystemctlName("/usr/bin/hpod-agent"));
  EXPECT_FALSE(IsSystemctlName(nullptr));
}

TEST(SystemctlShimTest, UnitFilesAreWhereHyperPodsScriptsEditThem) {
  // start_slurm.sh: SLURMD_OPTIONS="--conf-server …" envsubst < slurmd.service.
  EXPECT_NE(UnitFileText("slurmd").find("ExecStart=/usr/sbin/slurmd -D -s $SLURMD_OPTIONS\n"),
            std::string::npos);
  EXPECT_NE(UnitFileText("slurmctld").find("[Install]\nWantedBy=multi-user.target"),
            std::string::npos);
  EXPECT_NE(UnitFileText("slurmdbd").find("Description=Slurm DBD accounting daemon"),
            std::string::npos);

  testing::TempDir tmp;
  const std::string bin = tmp / "bin", units = tmp / "units";
  // A unit the script already moved aside is not written again; a file of the
  // user's at a link's place is left alone.
  ASSERT_TRUE(
      WriteFileAtomic(units + "/slurmd_DO_NOT_START_ON_CONTROLLER.service", "x", 0644).ok());
  ASSERT_TRUE(InstallSystemctl(bin, units).ok());
  EXPECT_TRUE(fs::is_symlink(bin + "/systemctl"));
  EXPECT_TRUE(fs::is_symlink(bin + "/journalctl"));
  EXPECT_EQ(fs::read_symlink(bin + "/systemctl"), fs::read_symlink("/proc/self/exe"));
  EXPECT_EQ(*ReadFile(units + "/slurmctld.service"), UnitFileText("slurmctld"));
  EXPECT_FALSE(fs::exists(units + "/slurmd.service"));
  // Idempotent; an edited unit file is the script's and stays.
  ASSERT_TRUE(WriteFileAtomic(units + "/slurmctld.service", "edited", 0644).ok());
  ASSERT_TRUE(InstallSystemctl(bin, units).ok());
  EXPECT_EQ(*ReadFile(units + "/slurmctld.service"), "edited");
  fs::remove(bin + "/journalctl");
  ASSERT_TRUE(WriteFileAtomic(bin + "/journalctl", "#!/bin/sh\n", 0755).ok());
  Status s = InstallSystemctl(bin, units);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(*ReadFile(bin + "/journalctl"), "#!/bin/sh\n");
}

}  // namespace
}  // namespace hpod::agent

namespace hpod::agent {
namespace {

// The shim against a fake agent: a local socket that answers from a table of
// unit states and records the requests.
class SystemctlShimExitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = tmp_ / "agent.sock";
    log_ = tmp_ / "slurmd.log";
    ASSERT_TRUE(WriteFileAtomic(log_, "one\ntwo\nthree\n", 0644).ok());
    server_ = std::make_unique<LocalSocketServer>(
        socket_, [this](const json& request, uid_t) -> StatusOr<json> {
          auto r = UnitRequest::FromJson(request);
          if (!r.ok()) return r.status();
          std::lock_guard<std::mutex> lock(mu_);
          verbs_.push_back(std::string(UnitVerbName(r->verb)));
          std::vector<UnitState> out;
          for (const std::string& u : r->units) {
            UnitState s;
            s.name = u;
            s.active = u == "slurmd" ? "active" : "inactive";
            s.pid = u == "slurmd" ? 7 : 0;
            s.logs = {log_};
            out.push_back(s);
          }
          return UnitsAnswer(out);
        });
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override { server_->Stop(); }

  int Run(std::vector<std::string> args, std::string* out = nullptr) {
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    ::testing::internal::CaptureStdout();
    int rc = SystemctlShimMain(static_cast<int>(argv.size()), argv.data(), socket_);
    std::string printed = ::testing::internal::GetCapturedStdout();
    if (out) *out = printed;
    return rc;
  }
  std::vector<std::string> Verbs() {
    std::lock_guard<std::mutex> lock(mu_);
    return verbs_;
  }

  testing::TempDir tmp_;
  std::string socket_, log_;
  std::unique_ptr<LocalSocketServer> server_;
  std::mutex mu_;
  std::vector<std::string> verbs_;
};

TEST_F(SystemctlShimExitTest, SystemdsWordsAndExitCodes) {
  std::string out;
  EXPECT_EQ(Run({"systemctl", "is-active", "slurmd"}, &out), 0);
  EXPECT_EQ(out, "active\n");
  EXPECT_EQ(Run({"systemctl", "is-active", "--quiet", "slurmctld"}, &out), 3);
  EXPECT_EQ(out, "");
  // Any of them active is enough, as systemd's man page says.
  EXPECT_EQ(Run({"systemctl", "is-active", "slurmctld", "slurmd.service"}, &out), 0);
  EXPECT_EQ(out, "inactive\nactive\n");
  EXPECT_EQ(Run({"systemctl", "is-active"}), 1) << "Too few arguments";
  // Units it does not run: systemd's codes for a unit it does not have.
  const size_t asked = Verbs().size();
  EXPECT_EQ(Run({"systemctl", "is-active", "docker"}, &out), 3);
  EXPECT_EQ(out, "inactive\n");
  EXPECT_EQ(Run({"systemctl", "start", "docker"}), 5);
  EXPECT_EQ(Run({"systemctl", "stop", "docker.service"}), 5);
  EXPECT_EQ(Run({"systemctl", "enable", "docker"}), 1);
  EXPECT_EQ(Run({"systemctl", "status", "docker"}), 4);
  EXPECT_EQ(Run({"systemctl", "reboot"}), 1);
  EXPECT_EQ(Run({"systemctl", "daemon-reload"}), 0);
  EXPECT_EQ(Verbs().size(), asked) << "none of these reached the agent";
  // status: 3 for a unit not active, with its log's last lines.
  EXPECT_EQ(Run({"systemctl", "status", "slurmctld", "-n", "2"}, &out), 3);
  EXPECT_NE(out.find("Active: inactive (dead)"), std::string::npos) << out;
  EXPECT_NE(out.find("two\nthree\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("one\n"), std::string::npos) << out;
  EXPECT_EQ(Run({"systemctl", "show", "-p", "MainPID", "--value", "slurmd"}, &out), 0);
  EXPECT_EQ(out, "7\n");
}

TEST_F(SystemctlShimExitTest, TryRestartLeavesAStoppedUnitAlone) {
  EXPECT_EQ(Run({"systemctl", "try-restart", "slurmctld"}), 0);
  EXPECT_EQ(Verbs(), std::vector<std::string>{"query"});
  EXPECT_EQ(Run({"systemctl", "try-restart", "slurmd"}), 0);
  EXPECT_EQ(Verbs(), (std::vector<std::string>{"query", "query", "restart"}));
  // reload-or-restart starts a stopped unit, reloads a running one.
  EXPECT_EQ(Run({"systemctl", "reload-or-restart", "slurmctld", "slurmd"}), 0);
  EXPECT_EQ(Verbs(), (std::vector<std::string>{"query", "query", "restart", "query", "start",
                                               "query", "reload"}));
}

}  // namespace
}  // namespace hpod::agent
