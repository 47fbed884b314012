#include "hpod/cli/wait.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "hpod/api/states.h"

namespace hpod::cli {
namespace {

std::string WaiterTitle(Waiter waiter) {
  return waiter == Waiter::kClusterInService ? "ClusterInService" : "ClusterDeleted";
}

std::string FormatElapsed(std::chrono::seconds elapsed) {
  int64_t s = elapsed.count();
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof(buf), "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof(buf), "%02lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buf;
}

// "Creating  controller-machine 1/1  compute-nodes 2/4" (no elapsed time, so that
// two polls can be compared).
std::string DescribeState(const Json& cluster) {
  std::string line = cluster.value("ClusterStatus", std::string("?"));
  auto groups = cluster.find("InstanceGroups");
  if (groups != cluster.end() && groups->is_array()) {
    for (const auto& g : *groups) {
      auto count = [&](const char* key) {
        auto it = g.find(key);
        return it != g.end() && it->is_number() ? std::to_string(it->get<int64_t>())
                                                : std::string("?");
      };
      line += "  " + g.value("InstanceGroupName", std::string("?")) + " " + count("CurrentCount") +
              "/" + count("TargetCount");
    }
  }
  // A software update says where it stands (hpod's HpodSoftwareUpdate member).
  auto update = cluster.find("HpodSoftwareUpdate");
  if (line.rfind("SystemUpdating", 0) == 0 && update != cluster.end() && update->is_object()) {
    line += "  " + update->value("Message", std::string());
  }
  return line;
}

// Writes progress lines: live (one line redrawn) or plain (a line per change).
// Thread contract: used by the waiting thread only.
class ProgressPrinter {
 public:
  ProgressPrinter(std::ostream& out, bool live, std::string name)
      : out_(out), live_(live), name_(std::move(name)) {}

  void Update(const std::string& state, std::chrono::seconds elapsed) {
    std::string line = name_ + ": " + state + "  [" + FormatElapsed(elapsed) + "]";
    if (live_) {
      // Pad over the previous line's leftovers instead of relying on ANSI codes.
      std::string padded = line;
      if (padded.size() < last_width_) padded += std::string(last_width_ - padded.size(), ' ');
      out_ << "\r" << padded << std::flush;
      last_width_ = line.size();
      drawn_ = true;
    } else if (state != last_state_) {
      out_ << line << "\n" << std::flush;
    }
    last_state_ = state;
  }

  // Ends the live line so that what follows starts on a fresh one.
  void Finish() {
    if (live_ && drawn_) out_ << "\n" << std::flush;
    drawn_ = false;
  }

 private:
  std::ostream& out_;
  bool live_;
  std::string name_;
  std::string last_state_;
  size_t last_width_ = 0;
  bool drawn_ = false;
};

}  // namespace

std::chrono::seconds DefaultWaitTimeout(Waiter waiter) {
  return waiter == Waiter::kClusterInService ? std::chrono::seconds(7200)
                                             : std::chrono::seconds(3600);
}

Status WaitForCluster(ApiClient& client, const WaitOptions& options, const Clock& clock,
                      Sleeper& sleeper, std::ostream& progress) {
  const api::Operation* describe = api::ServiceModel::Get().FindOperation("DescribeCluster");
  if (describe == nullptr) return InternalError("the model has no DescribeCluster operation");
  const std::string prefix = "Waiter " + WaiterTitle(options.waiter) + " failed: ";
  const Json request = {{"ClusterName", options.cluster_name}};
  const auto start = clock.SteadyNow();
  ProgressPrinter printer(progress, options.live, options.cluster_name);
  bool saw_deleting = false;
  std::string last_status = "unknown";

  while (true) {
    StatusOr<Json> cluster = client.Call(*describe, request);
    auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(clock.SteadyNow() - start);
    if (!cluster.ok()) {
      if (options.waiter == Waiter::kClusterDeleted &&
          cluster.status().aws_type() == "ResourceNotFound") {
        printer.Update("deleted", elapsed);
        printer.Finish();
        return OkStatus();
      }
      printer.Finish();
      return Status(cluster.status().code(), prefix + cluster.status().message());
    }
    const std::string status = cluster->value("ClusterStatus", std::string());
    const std::optional<api::ClusterStatus> state = api::Parse<api::ClusterStatus>(status);
    last_status = status;
    printer.Update(DescribeState(*cluster), elapsed);
    if (options.waiter == Waiter::kClusterInService) {
      if (state == api::ClusterStatus::kInService) {
        printer.Finish();
        return OkStatus();
      }
      if (state == api::ClusterStatus::kFailed || state == api::ClusterStatus::kDeleting) {
        printer.Finish();
        std::string message =
            prefix + "Waiter encountered a terminal failure state: ClusterStatus is " + status;
        std::string failure = cluster->value("FailureMessage", std::string());
        if (!failure.empty()) message += ": " + failure;
        return FailedPreconditionError(message);
      }
    } else {
      if (state == api::ClusterStatus::kDeleting) saw_deleting = true;
      if (state == api::ClusterStatus::kFailed && saw_deleting) {
        printer.Finish();
        std::string message =
            prefix + "Waiter encountered a terminal failure state: ClusterStatus is Failed";
        std::string failure = cluster->value("FailureMessage", std::string());
        if (!failure.empty()) message += ": " + failure;
        return FailedPreconditionError(message);
      }
    }
    if (elapsed >= options.timeout) {
      printer.Finish();
      return DeadlineExceededError(prefix + "timed out after " +
                                   std::to_string(options.timeout.count()) +
                                   " seconds (last ClusterStatus: " + last_status + ")");
    }
    auto remaining = options.timeout - elapsed;
    sleeper.SleepFor(std::chrono::duration_cast<std::chrono::milliseconds>(
        std::min<std::chrono::seconds>(options.delay, remaining)));
  }
}

}  // namespace hpod::cli
