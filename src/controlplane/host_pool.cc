#include "hpod/controlplane/host_pool.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include "hpod/api/states.h"

namespace hpod::controlplane {

StatusOr<store::HostRecord> ReserveSpare(
    store::WriteTx& tx, const Clock& clock, const SpareRequest& request,
    const std::function<bool(const store::HostRecord&)>& usable) {
  // ListHosts("") would be every pool: a launch always names its pool.
  if (request.pool.empty()) return InvalidArgumentError("a spare is taken from a named pool");
  HPOD_ASSIGN_OR_RETURN(auto hosts, tx.ListHosts(request.pool));
  const double since = clock.NowEpochSeconds() - kHostFailureWindowSeconds;
  struct Candidate {
    int failures;
    double idle_since;
    store::HostRecord host;
  };
  std::vector<Candidate> candidates;
  for (store::HostRecord& h : hosts) {
    if (!api::Is(h.state, api::HostState::kSpare) || h.instance_type != request.instance_type) {
      continue;
    }
    if (usable && !usable(h)) continue;
    HPOD_ASSIGN_OR_RETURN(auto history, tx.ListHostHistory(h.host_id));
    candidates.push_back({FailuresSince(history, since), h.state_changed, std::move(h)});
  }
  if (candidates.empty()) {
    return ResourceExhaustedError("no Spare host of type " + request.instance_type + " in pool " +
                                  request.pool);
  }
  auto best = std::min_element(candidates.begin(), candidates.end(),
                               [](const Candidate& a, const Candidate& b) {
                                 return std::tie(a.failures, a.idle_since, a.host.host_id) <
                                        std::tie(b.failures, b.idle_since, b.host.host_id);
                               });
  store::HostRecord host = std::move(best->host);
  HPOD_RETURN_IF_ERROR(ChangeHostState(tx, clock, host, api::HostState::kAssigned,
                                       request.reason, request.placement));
  return host;
}

}  // namespace hpod::controlplane
