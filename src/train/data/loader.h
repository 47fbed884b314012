// Training samples from token shards: the loader of hpod-train.
//
// Samples. The shards are concatenated (in the order given; globs expand
// sorted) into one token stream of T tokens. Sample k (0 <= k < N, N =
// (T - 1) / seq_len) is the window of seq_len + 1 tokens starting at token
// k * seq_len: x = its first seq_len tokens, y = its last seq_len (x shifted by
// one). Windows do not overlap except for the shared boundary token, and cross
// shard and document boundaries (documents are separated by BOS).
//
// Order. Epoch e visits every sample once, in the order perm_e, a Fisher-Yates
// shuffle of [0, N) driven by the counter-based generator of EpochPermutation()
// below, so it depends only on (seed, e, N) and never on the C++ library.
// Global sample index i (= consumed_samples + offset within the run) is sample
// perm_{i / N}[i % N]. A run resumed with consumed_samples = c therefore reads
// exactly what the uninterrupted run read from its c-th sample on.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::train::data {

// A finite, indexable set of training samples.
//
// Thread contract: implementations are immutable after construction (any
// internal cache is synchronized), so Sample() may be called from any number
// of threads at once.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  // Samples per epoch (N above), >= 1.
  virtual int64_t num_samples() const = 0;
  virtual uint32_t vocab_size() const = 0;
  virtual int64_t seq_len() const = 0;
  // Fills x[0, seq_len) and y[0, seq_len) for global sample index i >= 0.
  virtual void Sample(int64_t i, int32_t* x, int32_t* y) const = 0;
  // Identifies the token stream: equal fingerprints (with equal seq_len and
  // seed) mean equal samples for every index. Shards: their count, token
  // counts and content checksums in order; synthetic: vocab and the name.
  // Checkpoints record it so a resume on other data is refused.
  virtual std::string fingerprint() const = 0;
};

// Opens shards for training. `paths_or_globs` are file names or glob(3)
// patterns; each must name at least one file (NotFound naming it). Every shard
// is opened with its checksum verified (DataLoss naming the file otherwise) and
// all must share one vocab_size (InvalidArgument otherwise). InvalidArgument
// when seq_len < 1 or the shards hold fewer than seq_len + 1 tokens.
StatusOr<std::unique_ptr<TokenSource>> OpenShards(const std::vector<std::string>& paths_or_globs,
                                                  int64_t seq_len, uint64_t seed);

// Random tokens for throughput runs, no files: token t of the (seq_len + 1)-token
// window of global sample i is SplitMix64Mix(seed ^ SplitMix64Mix(i * (seq_len+1)
// + t)) reduced to [0, vocab_size) by multiply-shift. Every global index has its
// own content (there is no shuffle); num_samples only sets the epoch length
// progress bars report.
std::unique_ptr<TokenSource> SyntheticTokens(uint32_t vocab_size, int64_t seq_len, uint64_t seed,
                                             int64_t num_samples = 1 << 20);

// Fills a micro-batch: row r (0 <= r < batch) is global sample first_sample + r;
// x and y are row-major [batch, seq_len]. Runs on the calling thread.
void FillBatch(const TokenSource& s, int64_t first_sample, int64_t batch, int32_t* x, int32_t* y);

// The generator behind the shuffle, so the order can be reproduced elsewhere
// (e.g. in Python). SplitMix64's output function (Steele et al. 2014):
//   z = x; z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9; z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
//   return z ^ (z >> 31)
uint64_t SplitMix64Mix(uint64_t x);

// perm_e for n samples: key = SplitMix64Mix(seed ^ SplitMix64Mix(epoch)); the
// j-th draw (j = 1, 2, …) is r_j = SplitMix64Mix(key + j * 0x9e3779b97f4a7c15);
// start from the identity and for i = n-1 down to 1 swap element i with element
// (r * (i + 1)) >> 64 (128-bit product; Lemire's multiply-shift, bias < n/2^64),
// r being the next draw.
std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int64_t epoch);

}  // namespace hpod::train::data
