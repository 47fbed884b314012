#pragma once

// The InstanceConnectivity deep health check (docs/node-health.md, "Deep health
// checks"), one process per checked node, all started together:
//   1. every rank joins one world (rendezvous.h): the communicator connects
//      every pair, so a rank that cannot reach another fails here, by name;
//   2. iperf3 between neighbours, one link at a time: i → i+1 and i → i-1 around
//      the ring (for two nodes, both directions of their one link);
//   3. our own collectives: allreduce bus bandwidth (NCCL's convention,
//      algbw × 2(N-1)/N) and the latency of a 4-byte allreduce.
// Rank 0 gathers everything and judges by ratio, not by absolute numbers: a
// link is slow when it carries less than `min_link_ratio` of the best link of
// the same check, and the allreduce is slow when its bus bandwidth is below
// `min_busbw_ratio` of the median iperf3 link. A node is blamed for its sending
// side: it fails when every link out of it is slow (an ingress fault shows as
// slow links out of its neighbours, which are blamed only when all their links
// out are slow too). With two nodes that means a slow link fails its sending end.
//
// Thread contract: free functions; RunConnectivityCheck uses the JoinedWorld of
// its caller's thread.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/train/comm/rendezvous.h"

namespace hpod::train::comm {

struct ConnectivityOptions {
  int iperf_seconds = 1;
  int iperf_port = 5201;  // rank r listens on iperf_port + r
  int64_t allreduce_bytes = 8 << 20;
  int allreduce_iters = 4;
  int latency_iters = 40;
  double min_link_ratio = 0.25;
  double min_busbw_ratio = 0.02;
  double max_latency_ms = 100;
  // How messages name the ranks (hostnames); empty: "rank R (address)".
  std::vector<std::string> names;
};

struct LinkMeasure {
  int from = 0;
  int to = 0;
  double bits_per_second = 0;
  std::string error;  // iperf3 could not measure it (counts as 0 bit/s)
};

struct ConnectivityVerdict {
  // Per rank: empty when the rank passed, else why it failed.
  std::vector<std::string> failures;
  std::string summary;  // one line: what was measured
  nlohmann::json detail;
};

// The ordered links the check measures for `n` ranks.
std::vector<std::pair<int, int>> RingLinks(int n);

// Rank 0's judgement (the rules above). `names` label the ranks in messages.
ConnectivityVerdict JudgeConnectivity(const std::vector<std::string>& names,
                                      const std::vector<LinkMeasure>& links,
                                      double busbw_bits_per_second, double latency_ms,
                                      const ConnectivityOptions& options);

// Steps 2 and 3 on a joined world; every rank calls it. Rank 0's verdict is the
// check's, the others' are empty.
StatusOr<ConnectivityVerdict> RunConnectivityCheck(JoinedWorld& world,
                                                   const ConnectivityOptions& options);

}  // namespace hpod::train::comm
