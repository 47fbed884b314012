#include "hpod/train/data/loader.h"

#include <glob.h>

#include <algorithm>

#include "fmt/format.h"
#include "hpod/base/thread_annotations.h"
#include "hpod/train/data/shard.h"

namespace hpod::train::data {
namespace {

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ull;

// Shards concatenated, sampled in per-epoch shuffled order.
// Thread contract: see TokenSource; the permutation cache is guarded by mu_.
class ShardSource final : public TokenSource {
 public:
  ShardSource(std::vector<Shard> shards, int64_t seq_len, uint64_t seed)
      : shards_(std::move(shards)), seq_len_(seq_len), seed_(seed) {
    int64_t total = 0;
    for (const Shard& s : shards_) {
      starts_.push_back(total);
      total += s.num_tokens();
    }
    total_tokens_ = total;
    num_samples_ = (total - 1) / seq_len;
  }

  int64_t num_samples() const override { return num_samples_; }
  uint32_t vocab_size() const override { return shards_.front().vocab_size(); }
  int64_t seq_len() const override { return seq_len_; }
  std::string fingerprint() const override {
    std::string f = fmt::format("shards:{}", shards_.size());
    for (const Shard& s : shards_) {
      f += fmt::format(":{}/{:016x}", s.num_tokens(), s.checksum());
    }
    return f;
  }

  void Sample(int64_t i, int32_t* x, int32_t* y) const override {
    const int64_t epoch = i / num_samples_;
    const int64_t k = (*Permutation(epoch))[static_cast<size_t>(i % num_samples_)];
    // The window [k*seq_len, k*seq_len + seq_len] (inclusive): copy x, then
    // y = x[1..] + the last token.
    const int64_t start = k * seq_len_;
    CopyGlobal(start, seq_len_, x);
    std::copy(x + 1, x + seq_len_, y);
    CopyGlobal(start + seq_len_, 1, y + seq_len_ - 1);
  }

 private:
  // Copies global tokens [begin, begin + n), crossing shard boundaries.
  void CopyGlobal(int64_t begin, int64_t n, int32_t* out) const {
    // The shard holding `begin`: the last whose start is <= begin (empty shards
    // share a start with their successor and are skipped by the loop).
    size_t s = static_cast<size_t>(std::upper_bound(starts_.begin(), starts_.end(), begin) -
                                   starts_.begin() - 1);
    while (n > 0) {
      const int64_t offset = begin - starts_[s];
      const int64_t take = std::min(n, shards_[s].num_tokens() - offset);
      if (take > 0) {
        shards_[s].CopyTokens(offset, take, out);
        out += take;
        begin += take;
        n -= take;
      }
      ++s;
    }
  }

  // perm_epoch, computed once per epoch. Two epochs are kept so that threads
  // filling a batch that straddles an epoch boundary do not evict each other.
  std::shared_ptr<const std::vector<int64_t>> Permutation(int64_t epoch) const {
    MutexLock lock(mu_);
    for (const auto& [e, perm] : cache_) {
      if (e == epoch && perm != nullptr) return perm;
    }
    auto perm =
        std::make_shared<const std::vector<int64_t>>(EpochPermutation(num_samples_, seed_, epoch));
    cache_[next_slot_] = {epoch, perm};
    next_slot_ ^= 1;
    return perm;
  }

  const std::vector<Shard> shards_;
  std::vector<int64_t> starts_;  // global index of each shard's first token
  const int64_t seq_len_;
  const uint64_t seed_;
  int64_t total_tokens_ = 0;
  int64_t num_samples_ = 0;

  mutable Mutex mu_;
  mutable std::pair<int64_t, std::shared_ptr<const std::vector<int64_t>>> cache_[2] GUARDED_BY(mu_);
  mutable int next_slot_ GUARDED_BY(mu_) = 0;
};

// Thread contract: see TokenSource (stateless).
class SyntheticSource final : public TokenSource {
 public:
  SyntheticSource(uint32_t vocab, int64_t seq_len, uint64_t seed, int64_t num_samples)
      : vocab_(vocab), seq_len_(seq_len), seed_(seed), num_samples_(num_samples) {}

  int64_t num_samples() const override { return num_samples_; }
  uint32_t vocab_size() const override { return vocab_; }
  int64_t seq_len() const override { return seq_len_; }
  std::string fingerprint() const override { return fmt::format("synthetic:{}", vocab_); }

  void Sample(int64_t i, int32_t* x, int32_t* y) const override {
    const uint64_t base = static_cast<uint64_t>(i) * static_cast<uint64_t>(seq_len_ + 1);
    for (int64_t t = 0; t <= seq_len_; ++t) {
      const uint64_t h = SplitMix64Mix(seed_ ^ SplitMix64Mix(base + static_cast<uint64_t>(t)));
      const auto tok = static_cast<int32_t>((static_cast<unsigned __int128>(h) * vocab_) >> 64);
      if (t < seq_len_) x[t] = tok;
      if (t > 0) y[t - 1] = tok;
    }
  }

 private:
  const uint32_t vocab_;
  const int64_t seq_len_;
  const uint64_t seed_;
  const int64_t num_samples_;
};

StatusOr<std::vector<std::string>> ExpandPaths(const std::vector<std::string>& patterns) {
  std::vector<std::string> out;
  for (const std::string& p : patterns) {
    if (p.find_first_of("*?[") == std::string::npos) {
      out.push_back(p);  // a plain path; Shard::Open reports it if missing
      continue;
    }
    glob_t g{};
    const int rc = ::glob(p.c_str(), GLOB_ERR, nullptr, &g);
    if (rc == GLOB_NOMATCH) {
      ::globfree(&g);
      return NotFoundError("no shard matches " + p);
    }
    if (rc != 0) {
      ::globfree(&g);
      return InternalError("expanding " + p + ": glob failed");
    }
    std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);
    ::globfree(&g);
    std::sort(matches.begin(), matches.end());
    out.insert(out.end(), matches.begin(), matches.end());
  }
  return out;
}

}  // namespace

uint64_t SplitMix64Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(static_cast<size_t>(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) perm[static_cast<size_t>(i)] = i;
  const uint64_t key = SplitMix64Mix(seed ^ SplitMix64Mix(static_cast<uint64_t>(epoch)));
  uint64_t j = 0;
  for (int64_t i = n - 1; i >= 1; --i) {
    const uint64_t r = SplitMix64Mix(key + (++j) * kGolden);
    const auto pick = static_cast<int64_t>(
        (static_cast<unsigned __int128>(r) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(perm[static_cast<size_t>(i)], perm[static_cast<size_t>(pick)]);
  }
  return perm;
}

StatusOr<std::unique_ptr<TokenSource>> OpenShards(const std::vector<std::string>& paths_or_globs,
                                                  int64_t seq_len, uint64_t seed) {
  if (seq_len < 1) {
    return InvalidArgumentError("seq_len must be >= 1, got " + std::to_string(seq_len));
  }
  if (paths_or_globs.empty()) return InvalidArgumentError("no shards given");
  HPOD_ASSIGN_OR_RETURN(std::vector<std::string> paths, ExpandPaths(paths_or_globs));
  std::vector<Shard> shards;
  int64_t total = 0;
  for (const std::string& path : paths) {
    HPOD_ASSIGN_OR_RETURN(Shard shard, Shard::Open(path, /*verify_checksum=*/true));
    if (!shards.empty() && shard.vocab_size() != shards.front().vocab_size()) {
      return InvalidArgumentError(
          "shard " + path + " has vocab_size " + std::to_string(shard.vocab_size()) + " but " +
          shards.front().path() + " has " + std::to_string(shards.front().vocab_size()) +
          "; tokenize all shards with one tokenizer");
    }
    total += shard.num_tokens();
    shards.push_back(std::move(shard));
  }
  if (total < seq_len + 1) {
    return InvalidArgumentError(
        "the shards hold " + std::to_string(total) +
        " tokens, fewer than one sample of seq_len + 1 = " + std::to_string(seq_len + 1));
  }
  return std::unique_ptr<TokenSource>(new ShardSource(std::move(shards), seq_len, seed));
}

std::unique_ptr<TokenSource> SyntheticTokens(uint32_t vocab_size, int64_t seq_len, uint64_t seed,
                                             int64_t num_samples) {
  HPOD_CHECK(vocab_size > 0 && seq_len > 0 && num_samples > 0);
  return std::make_unique<SyntheticSource>(vocab_size, seq_len, seed, num_samples);
}

void FillBatch(const TokenSource& s, int64_t first_sample, int64_t batch, int32_t* x, int32_t* y) {
  const int64_t t = s.seq_len();
  for (int64_t r = 0; r < batch; ++r) s.Sample(first_sample + r, x + r * t, y + r * t);
}

}  // namespace hpod::train::data
