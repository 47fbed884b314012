// Text files → token shards: what `hpod-data tokenize` does.
//
// Documents are lines: every non-blank line of every input (in order) is one
// document, encoded as BOS followed by its tokens (no EOS, as llama2.c). The
// corpus extraction writes one KJV verse or one Austen paragraph per line; other
// text should be brought into that form first (a paragraph wrapped over several
// lines would otherwise become several documents).
//
// Validation split: document d (0-based, counted over all inputs) goes to the
// validation shard iff SplitMix64Mix(val_seed ^ SplitMix64Mix(d)) < val_fraction
// * 2^64, so the split is per document (no verse is cut in two) and spread over
// the whole corpus rather than taken from its end.
//
// Encoding runs in parallel over ~1 MB chunks of whole documents; the output is
// concatenated in input order and so is identical for any thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/train/data/tokenizer.h"

namespace hpod::train::data {

struct TokenizeOptions {
  std::vector<std::string> inputs;  // text files, one document per line
  std::string output;               // the training shard
  std::string val_output;           // the validation shard; empty: no split
  double val_fraction = 0.01;       // used only with val_output, in [0, 1)
  uint64_t val_seed = 0;
  int threads = 1;
  // Documents are encoded in chunks of about this many bytes, one chunk per task.
  int64_t chunk_bytes = 1 << 20;
};

struct TokenizeStats {
  int64_t bytes_read = 0;  // input bytes, for MB/s
  int64_t documents = 0;
  int64_t tokens = 0;  // train + val, BOS included
  int64_t train_documents = 0;
  int64_t train_tokens = 0;
  int64_t val_documents = 0;
  int64_t val_tokens = 0;
  double seconds = 0;  // wall time of the whole call
};

// Tokenizes and writes the shard(s) atomically. `progress`, when set, is called
// after each chunk with the running totals (bytes_read/tokens so far), from one
// thread at a time. InvalidArgument for bad options (naming the flag's field).
StatusOr<TokenizeStats> TokenizeFiles(const Tokenizer& tokenizer, const TokenizeOptions& options,
                                      const std::function<void(const TokenizeStats&)>& progress);

}  // namespace hpod::train::data
