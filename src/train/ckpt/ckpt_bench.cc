// Checkpoint throughput and stall: train_ckpt_bench DIR [MB] [SAVES].
// Saves MB of fp32 state (three tensors, like params + AdamW m and v) SAVES times
// through AsyncCheckpointer and loads the newest back; prints the stall (memcpy into
// the staging buffer), the writer's MB/s to durable, and the load MB/s. Compare with
// `dd if=/dev/zero of=DIR/x bs=4M count=25 conv=fdatasync` on the same file system.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "hpod/train/ckpt/checkpoint.h"

using hpod::train::ckpt::AsyncCheckpointer;
using hpod::train::ckpt::TensorView;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s DIR [MB=86] [SAVES=5]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const double mb = argc > 2 ? std::atof(argv[2]) : 86.0;
  const int saves = argc > 3 ? std::atoi(argv[3]) : 5;
  const int64_t per = static_cast<int64_t>(mb * 1e6 / 4 / 3);
  std::vector<std::vector<float>> state(3, std::vector<float>(per, 0.5f));  // touched
  std::vector<TensorView> views;
  const char* names[] = {"params", "adam_m", "adam_v"};
  for (int i = 0; i < 3; ++i) views.push_back({names[i], {per}, state[i].data(), per});

  auto c = AsyncCheckpointer::Create(dir, {.keep_last = 2});
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
    return 1;
  }
  const auto r0 = std::chrono::steady_clock::now();
  if (!(*c)->Reserve(AsyncCheckpointer::FileBytes(views)).ok()) return 1;
  std::printf(
      "reserve (first touch of staging): %.1f ms\n",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r0).count());
  for (int s = 1; s <= saves; ++s) {
    state[0][0] = static_cast<float>(s);
    auto st = (*c)->Save(s, {{"step", s}}, views);
    if (!st.ok()) {
      std::fprintf(stderr, "%s\n", st.status().ToString().c_str());
      return 1;
    }
    if (!(*c)->Wait().ok()) return 1;
    std::printf("save %d: stall %.2f ms (snapshot %.2f ms, %.1f GB/s), %.1f MB\n", s,
                st->stall_s * 1e3, st->snapshot_s * 1e3, st->bytes / st->snapshot_s / 1e9,
                st->bytes / 1e6);
  }
  if (!(*c)->Close().ok()) return 1;
  for (const auto& st : (*c)->completed()) {
    std::printf("write step %lld: %.1f ms = %.0f MB/s (to durable)\n",
                static_cast<long long>(st.step), st.write_s * 1e3, st.bytes / st.write_s / 1e6);
  }
  for (int i = 0; i < 3; ++i) {
    hpod::train::ckpt::LoadStats ls;
    // i == 0: into fresh std::vectors (pays first-touch page faults); then in place
    // into the already-touched state, as a resuming trainer would.
    hpod::train::ckpt::TensorSink sink;
    if (i > 0) {
      sink = [&](const std::string& name, const std::vector<int64_t>&) -> hpod::StatusOr<float*> {
        for (int k = 0; k < 3; ++k) {
          if (name == names[k]) return state[k].data();
        }
        return static_cast<float*>(nullptr);
      };
    }
    auto loaded = hpod::train::ckpt::LoadLatest(dir, sink, nullptr, &ls);
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      return 1;
    }
    std::printf("load (verified, %s): %.1f ms = %.0f MB/s\n", i == 0 ? "fresh vectors" : "in place",
                ls.load_s * 1e3, ls.bytes / ls.load_s / 1e6);
  }
  return 0;
}
