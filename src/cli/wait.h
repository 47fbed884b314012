#pragma once

// `hpod wait cluster-in-service|cluster-deleted`: SageMaker defines no cluster
// waiters, so these poll DescribeCluster the way AWS waiters do (fixed delay, a
// bounded number of polls) and report progress while they wait.
//
//   cluster-in-service  success: ClusterStatus == InService;
//                       failure: Failed (the FailureMessage is reported), Deleting,
//                       or any service error such as ResourceNotFound.
//   cluster-deleted     success: DescribeCluster answers ResourceNotFound;
//                       failure: Failed after Deleting was seen, or another error.
//
// Progress goes to `progress` (stderr): with `live` one line rewritten in place
// with '\r' (status, elapsed, CurrentCount/TargetCount per instance group),
// otherwise a plain line whenever anything but the elapsed time changes.
//
// Thread contract: WaitForCluster runs on the caller's thread and uses the given
// client, clock and sleeper exclusively while it runs.

#include <chrono>
#include <ostream>
#include <string>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"
#include "hpod/cli/args.h"
#include "hpod/cli/client.h"

namespace hpod::cli {

struct WaitOptions {
  Waiter waiter = Waiter::kClusterInService;
  std::string cluster_name;
  // Time between polls (AWS waiters use a fixed delay too).
  std::chrono::seconds delay{2};
  // Give up after this long; DefaultWaitTimeout() when the user sets none.
  std::chrono::seconds timeout{7200};
  // Rewrite one status line with '\r' (stderr is a terminal).
  bool live = false;
};

// 2 h for cluster-in-service (large clusters provision for a long time), 1 h for
// cluster-deleted.
std::chrono::seconds DefaultWaitTimeout(Waiter waiter);

// Polls until the waiter's success state. Failures carry the message the CLI
// prints, "Waiter ClusterInService failed: ...": kFailedPrecondition for a
// terminal state, kDeadlineExceeded for the timeout, the service error's own
// code otherwise.
Status WaitForCluster(ApiClient& client, const WaitOptions& options, const Clock& clock,
                      Sleeper& sleeper, std::ostream& progress);

}  // namespace hpod::cli
