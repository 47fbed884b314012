#pragma once

// SlurmNodeTest's fixture (slurm_node_test.cc, slurm_units_test.cc): shell
// scripts in a temporary directory stand in for munged, slurmctld, slurmd and
// scontrol, record how they were started, and let the test kill them or script
// what `scontrol -o show nodes` prints. Waits poll with generous deadlines;
// nothing asserts on timing.
//
// Thread contract: a test's thread, and the node's worker calling the hooks.

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "hpod/agent/slurm_node.h"
#include "hpod/agent/test_util.h"
#include "hpod/base/clock.h"

namespace hpod::agent::slurm_node_testing {

using nlohmann::json;
using testing::ReadTestFile;
using testing::TempDir;
using testing::WriteTestFile;
namespace fs = std::filesystem;

inline constexpr auto kDeadline = std::chrono::seconds(10);

// Polls `cond` until it holds or the deadline passes; returns its last value.
inline bool WaitFor(const std::function<bool()>& cond) {
  const auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (std::chrono::steady_clock::now() < deadline) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

inline std::vector<std::string> Lines(const std::string& path) {
  std::vector<std::string> out;
  std::istringstream in(ReadTestFile(path));
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

inline std::string NodeLine(const std::string& name, const std::string& state) {
  return "NodeName=" + name + " Arch=x86_64 CPUTot=2 State=" + state +
         " SlurmdStartTime=2024-01-01T00:00:00 Reason=(null)\n";
}

class SlurmNodeTest : public ::testing::Test {
 protected:
  SlurmNodeTest() {
    const std::string rec = tmp_ / "rec";
    fs::create_directories(rec);
    // munged: records its argv, creates the socket it was told to use (SlurmNode
    // checks readiness at <run_dir>/munge/munge.socket.2, so a mismatch shows).
    WriteTestFile(tmp_ / "bin/munged",
                  "#!/bin/bash\n"
                  "echo \"$*\" >> " +
                      rec +
                      "/munged.argv\n"
                      "for a in \"$@\"; do case \"$a\" in --socket=*) touch \"${a#--socket=}\";; "
                      "esac; done\n"
                      "echo $$ > " +
                      rec +
                      "/munged.pid\n"
                      "exec sleep 1000\n",
                  0755);
    for (const char* d : {"slurmctld", "slurmd"}) {
      const std::string p = rec + "/" + d;
      // Exits with code 3 while <rec>/<daemon>.exit exists.
      WriteTestFile(tmp_ / (std::string("bin/") + d),
                    "#!/bin/bash\n"
                    "echo \"$*\" >> " +
                        p +
                        ".argv\n"
                        "echo \"${SLURM_CONF-unset}\" >> " +
                        p +
                        ".env\n"
                        "hostname >> " +
                        p +
                        ".hostname\n"
                        "if [ -e " +
                        p +
                        ".exit ]; then exit 3; fi\n"
                        "echo $$ > " +
                        p + ".pid.tmp && mv " + p + ".pid.tmp " + p +
                        ".pid\n"
                        "exec sleep 1000\n",
                    0755);
    }
    WriteTestFile(tmp_ / "bin/scontrol",
                  "#!/bin/bash\n"
                  "case \"$1\" in\n"
                  // Like the real one, ping answers only while a slurmctld runs (its
                  // pid file is written once it recorded its argv).
                  "  ping) kill -0 \"$(cat " +
                      rec +
                      "/slurmctld.pid 2>/dev/null)\" 2>/dev/null || exit 1\n"
                      "        echo 'Slurmctld(primary) at x is UP'; exit 0;;\n"
                      "  reconfigure) echo reconfigure >> " +
                      rec +
                      "/scontrol.log; exit 0;;\n"
                      "  -o) echo show >> " +
                      rec + "/show.log; cat " + rec +
                      "/nodes.txt 2>/dev/null; exit 0;;\n"
                      "esac\n"
                      "exit 1\n",
                  0755);
    rec_ = rec;
    options_.conf_dir = tmp_ / "conf";
    options_.munge_dir = tmp_ / "state/munge";
    options_.run_dir = tmp_ / "run";
    options_.log_dir = tmp_ / "log";
    options_.spool_dir = tmp_ / "spool";
    options_.motd_path = tmp_ / "motd";
    options_.no_slurm_marker = tmp_ / "run/hpod-no-slurm";
    options_.munged = tmp_ / "bin/munged";
    options_.slurmctld = tmp_ / "bin/slurmctld";
    options_.slurmd = tmp_ / "bin/slurmd";
    options_.scontrol = tmp_ / "bin/scontrol";
    options_.munge_user = "";
    options_.poll_interval = std::chrono::milliseconds(20);
    options_.restart_backoff_initial = std::chrono::milliseconds(50);
    options_.restart_backoff_max = std::chrono::milliseconds(400);
  }

  // auto_start: as on a node whose lifecycle scripts succeeded.
  void Start(bool auto_start = true) {
    node_ = std::make_unique<SlurmNode>(
        options_, RealClock::Get(),
        [this](const api::agentproto::SlurmStatus& status) {
          json s = status.ToJson();
          if (on_state_hook_) on_state_hook_(s);
          std::lock_guard<std::mutex> lock(mu_);
          states_.push_back(s);
        },
        [this](const std::vector<slurm::SlurmNodeState>& n) {
          std::lock_guard<std::mutex> lock(mu_);
          reports_.push_back(n);
        });
    if (auto_start) node_->SetAutoStart(true);
  }

  SlurmSpec Spec(const std::string& role, const std::string& hash) {
    SlurmSpec s;
    s.role = role;
    s.node_name = role == "controller" ? "ip-10-0-0-1" : "ip-10-0-0-2";
    s.controller_addr = "10.0.0.1";
    s.munge_key = key_;
    s.conf_hash = hash;
    s.node_names = {"ip-10-0-0-2", "ip-10-0-0-3"};
    if (role != "compute") {
      s.files = {{"slurm.conf", "ClusterName=demo # " + hash + "\n"},
                 {"plugstack.conf", "# none\n"}};
    }
    return s;
  }

  bool WaitForDaemon(const std::string& daemon, const std::string& hash) {
    return WaitFor([&] {
      json s = node_->State().ToJson();
      return s["daemon"] == daemon && s["conf_hash"] == hash;
    });
  }

  std::vector<json> States() {
    std::lock_guard<std::mutex> lock(mu_);
    return states_;
  }
  std::vector<std::vector<slurm::SlurmNodeState>> Reports() {
    std::lock_guard<std::mutex> lock(mu_);
    return reports_;
  }
  int PidOf(const std::string& daemon) {
    std::string text = ReadTestFile(rec_ + "/" + daemon + ".pid");
    return text.empty() ? 0 : std::stoi(text);
  }
  size_t Count(const std::string& file) { return Lines(rec_ + "/" + file).size(); }

  // Declared first: removed last, after the node stopped its children.
  TempDir tmp_;
  std::string rec_;
  std::string key_ = std::string(64, 'k') + std::string("\0\x01\xff", 3);
  SlurmNodeOptions options_;
  // Called on the worker thread with each state, as it is reported.
  std::function<void(const json&)> on_state_hook_;
  std::mutex mu_;
  std::vector<json> states_;
  std::vector<std::vector<slurm::SlurmNodeState>> reports_;
  std::unique_ptr<SlurmNode> node_;
};

}  // namespace hpod::agent::slurm_node_testing
