// Helpers shared by the checkpoint tests.
//
// Thread contract: test-only; each object is used by one thread.
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "hpod/train/ckpt/checkpoint.h"

namespace hpod::train::ckpt {

// A fresh directory under /tmp, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/hpod_ckpt_test.XXXXXX";
    path_ = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Owns tensor values and the views that Save() takes.
class TestTensors {
 public:
  // Values are base, base + 1, base + 2, ... so every element is distinct.
  void Add(std::string name, std::vector<int64_t> shape, float base) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    std::vector<float> v(static_cast<size_t>(numel));
    for (int64_t i = 0; i < numel; ++i) v[i] = base + static_cast<float>(i);
    values_.push_back(std::move(v));
    views_.push_back({std::move(name), std::move(shape), nullptr, numel});
    for (size_t i = 0; i < views_.size(); ++i) views_[i].data = values_[i].data();
  }
  const std::vector<TensorView>& views() const { return views_; }
  const std::vector<float>& values(size_t i) const { return values_[i]; }
  std::vector<float>& mutable_values(size_t i) { return values_[i]; }

 private:
  std::vector<std::vector<float>> values_;
  std::vector<TensorView> views_;
};

// One synchronous save through a fresh checkpointer (keep_last off).
inline Status SaveNow(const std::string& dir, int64_t step, const nlohmann::json& meta,
                      const std::vector<TensorView>& views) {
  auto c = AsyncCheckpointer::Create(dir, {.keep_last = 0});
  if (!c.ok()) return c.status();
  auto s = (*c)->Save(step, meta, views);
  if (!s.ok()) return s.status();
  return (*c)->Close();
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteFile(const std::string& path, const std::string& contents) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << contents;
}

// Names in `dir`, sorted.
inline std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hpod::train::ckpt
