// Collective bandwidth of one rank of a benchmark run (bench/comm_bench.py
// starts one per node):
//   train_comm_bench RANK WORLD MASTER_ADDR MASTER_PORT [MAX_MB=64]
// For sizes from 1 KiB to MAX_MB (x4 apart) it times the trainer's gradient
// path, reduce-scatter + allgather (an allreduce done as ZeRO-1 does it), each
// of the two alone, and gloo's own ring allreduce, and prints one JSON line
// per size and op from rank 0: seconds per op, algorithm bandwidth (bytes /
// time) and bus bandwidth: the bytes each rank sends (and receives) per op
// over the time, i.e. algbw x 2(N-1)/N for an allreduce and (N-1)/N for a
// reduce-scatter or allgather alone (the convention of NCCL's tests).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hpod/train/comm/rendezvous.h"

using namespace hpod::train::comm;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s RANK WORLD MASTER_ADDR MASTER_PORT [MAX_MB=64]\n", argv[0]);
    return 2;
  }
  World w;
  w.rank = std::atoi(argv[1]);
  w.size = std::atoi(argv[2]);
  w.master_addr = argv[3];
  w.master_port = static_cast<uint16_t>(std::atoi(argv[4]));
  w.run_id = "bench";
  const double max_mb = argc > 5 ? std::atof(argv[5]) : 64;
  JoinOptions jo;
  jo.rendezvous_timeout = std::chrono::seconds(60);
  auto joined = JoinWorld(w, {{"bench", 1}}, jo);
  if (!joined.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", w.rank, joined.status().message().c_str());
    return 1;
  }
  Communicator& c = *joined->comm;
  const double half = 1.0 * (w.size - 1) / w.size;
  for (int64_t bytes = 1024; bytes <= static_cast<int64_t>(max_mb * (1 << 20)); bytes *= 4) {
    const int64_t n = bytes / 4;
    std::vector<float> data(n, 1.0f);
    const auto counts = ShardCounts(n, w.size, 16);
    for (const char* op :
         {"reduce-scatter+allgather", "reduce-scatter", "allgather", "gloo allreduce"}) {
      const std::string name = op;
      auto once = [&]() -> hpod::Status {
        if (name == "gloo allreduce") return c.AllReduceSum(data.data(), n);
        if (name == "reduce-scatter") return c.ReduceScatterSum(data.data(), counts);
        if (name == "allgather") return c.AllGather(data.data(), counts);
        HPOD_RETURN_IF_ERROR(c.ReduceScatterSum(data.data(), counts));
        return c.AllGather(data.data(), counts);
      };
      for (int i = 0; i < 3; ++i) {  // warm-up: connections, buffers, page faults
        if (auto s = once(); !s.ok()) {
          std::fprintf(stderr, "rank %d: %s\n", w.rank, s.message().c_str());
          return 1;
        }
      }
      // Enough iterations for ~0.5 s (from the median of 5 timed ones),
      // decided on rank 0 and shared so every rank runs as many; each op is
      // timed alone and the median reported (a VM's occasional millisecond
      // wake-up would dominate a mean of small ops), the mean beside it.
      std::vector<double> t;
      auto timed = [&]() -> bool {
        const auto t0 = Clock::now();
        const bool ok = once().ok();
        t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
        return ok;
      };
      for (int i = 0; i < 5; ++i) {
        if (!timed()) return 1;
      }
      std::sort(t.begin(), t.end());
      int64_t iters =
          std::clamp<int64_t>(static_cast<int64_t>(0.5 / std::max(t[2], 1e-6)), 5, 2000);
      if (!c.Broadcast(&iters, sizeof(iters), 0).ok()) return 1;
      t.clear();
      for (int64_t i = 0; i < iters; ++i) {
        if (!timed()) return 1;
      }
      double mean = 0;
      for (double x : t) mean += x / static_cast<double>(t.size());
      std::sort(t.begin(), t.end());
      const double per = t[t.size() / 2];
      const double factor = half * (name.find('+') != std::string::npos || name[0] == 'g' ? 2 : 1);
      if (w.rank == 0) {
        std::printf(
            "{\"bytes\": %lld, \"op\": \"%s\", \"iters\": %lld, \"seconds\": %.9f, "
            "\"mean_seconds\": %.9f, \"algbw_gbps\": %.4f, \"busbw_gbps\": %.4f}\n",
            static_cast<long long>(bytes), op, static_cast<long long>(iters), per, mean,
            bytes / per / 1e9, bytes / per / 1e9 * factor);
        std::fflush(stdout);
      }
    }
  }
  return c.Barrier().ok() ? 0 : 1;
}
