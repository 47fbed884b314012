// Checkpoint throughput and stall:
//   train_ckpt_bench DIR [MB=86] [SAVES=5] [WORLD=1] [KEEP_LAST=2]
// Saves MB of fp32 state (params + AdamW m and v, as the trainer's parts) SAVES
// times through AsyncCheckpointer: WORLD ranks as threads, each writing its
// part of a sharded checkpoint in parallel, rank 0 committing. Prints, per
// save, one JSON line: the stall (the snapshot memcpy), and the write: all
// bytes from the first rank's Save() to rank 0's commit being durable. Then
// loads the newest back as a WORLD-rank run does. bench/ckpt_bench.py runs it
// against `dd conv=fdatasync` on the same file system.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "hpod/train/ckpt/checkpoint.h"
#include "hpod/train/ckpt/sharded.h"

using namespace hpod::train::ckpt;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [MB=86] [SAVES=5] [WORLD=1] [KEEP_LAST=2]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const double mb = argc > 2 ? std::atof(argv[2]) : 86.0;
  const int saves = argc > 3 ? std::atoi(argv[3]) : 5;
  const int world = argc > 4 ? std::max(1, std::atoi(argv[4])) : 1;
  const int keep = argc > 5 ? std::atoi(argv[5]) : 2;
  const int64_t total = static_cast<int64_t>(mb * 1e6 / 4 / 3);  // floats per array
  auto exchange = MakeLocalPartExchange();

  struct Rank {
    std::vector<std::vector<float>> state;
    std::unique_ptr<AsyncCheckpointer> ckpt;
    std::vector<TensorView> views;
  };
  std::vector<Rank> ranks(world);
  int64_t begin = 0;
  for (int r = 0; r < world; ++r) {
    const int64_t count = total / world + (r < total % world ? 1 : 0);
    Rank& k = ranks[r];
    k.state.assign(3, std::vector<float>(count, 0.5f));  // touched
    const char* names[] = {"params", "exp_avg", "exp_avg_sq"};
    for (int i = 0; i < 3; ++i) k.views.push_back({names[i], {count}, k.state[i].data(), count});
    CheckpointerOptions o;
    o.keep_last = keep;
    ShardingOptions s;
    s.rank = r;
    s.world = world;
    s.begin = begin;
    s.count = count;
    s.num_params = total;
    s.run_id = "bench";
    s.exchange = exchange.get();
    o.sharding = s;
    auto c = AsyncCheckpointer::Create(dir, o);
    if (!c.ok() || !(*c)->Reserve(AsyncCheckpointer::FileBytes(k.views)).ok()) {
      std::fprintf(stderr, "%s\n", c.ok() ? "reserve failed" : c.status().ToString().c_str());
      return 1;
    }
    k.ckpt = std::move(*c);
    begin += count;
  }

  for (int step = 1; step <= saves; ++step) {
    std::latch start(world);
    std::vector<double> stall(world);
    std::vector<int> failed(world, 0);
    std::vector<int64_t> bytes(world);
    const auto t0 = Clock::now();
    std::vector<std::thread> ts;
    for (int r = 0; r < world; ++r) {
      ts.emplace_back([&, r] {
        start.arrive_and_wait();
        ranks[r].state[0][0] = static_cast<float>(step);
        auto st = ranks[r].ckpt->Save(step, {{"step", step}}, ranks[r].views);
        failed[r] = !st.ok() || !ranks[r].ckpt->Wait().ok();
        if (st.ok()) {
          stall[r] = st->stall_s;
          bytes[r] = st->bytes;
        }
      });
    }
    for (auto& t : ts) t.join();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    int64_t all = 0;
    for (int r = 0; r < world; ++r) {
      if (failed[r]) {
        std::fprintf(stderr, "save %d failed on rank %d\n", step, r);
        return 1;
      }
      all += bytes[r];
    }
    std::printf(
        "{\"save\": %d, \"world\": %d, \"bytes\": %lld, \"seconds\": %.6f, "
        "\"mb_per_s\": %.1f, \"stall_s\": %.6f}\n",
        step, world, static_cast<long long>(all), secs, all / secs / 1e6, stall[0]);
    std::fflush(stdout);
  }
  for (auto& k : ranks) {
    if (!k.ckpt->Close().ok()) return 1;
  }
  // Load back as rank 0 of the same world: every part's params, its moments.
  const auto t0 = Clock::now();
  std::vector<float> params(total);
  auto loaded =
      LoadSharded(ListComplete(dir).front(),
                  [&](const PartInfo& p, const std::string& name) -> hpod::StatusOr<float*> {
                    if (name == "params") return params.data() + p.begin;
                    if (p.rank != 0) return nullptr;
                    return ranks[0].state[name == "exp_avg" ? 1 : 2].data();
                  });
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
    return 1;
  }
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("{\"load_bytes\": %lld, \"load_seconds\": %.6f, \"load_mb_per_s\": %.1f}\n",
              static_cast<long long>(loaded->bytes_read), secs, loaded->bytes_read / secs / 1e6);
  return 0;
}
