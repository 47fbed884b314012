#include "hpod/train/data/tokenize_files.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <string_view>
#include <thread>

#include "hpod/base/file_util.h"
#include "hpod/train/data/loader.h"
#include "hpod/train/data/shard.h"

namespace hpod::train::data {
namespace {

struct Document {
  std::string_view text;
  bool val = false;
};

// A run of whole documents encoded by one worker.
struct Chunk {
  size_t begin = 0, end = 0;  // document indices
  int64_t bytes = 0;
  std::vector<int32_t> train, val;
  int64_t train_documents = 0, val_documents = 0;
  Status status;
};

bool IsBlank(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
  });
}

}  // namespace

StatusOr<TokenizeStats> TokenizeFiles(const Tokenizer& tok, const TokenizeOptions& o,
                                      const std::function<void(const TokenizeStats&)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.inputs.empty()) return InvalidArgumentError("tokenize: no input files");
  if (o.output.empty()) return InvalidArgumentError("tokenize: no output shard");
  const bool split = !o.val_output.empty();
  if (split && !(o.val_fraction >= 0.0 && o.val_fraction < 1.0)) {
    return InvalidArgumentError("tokenize: val_fraction must be in [0, 1), got " +
                                std::to_string(o.val_fraction));
  }
  if (tok.bos_id() < 0) {
    return InvalidArgumentError("tokenize: tokenizer " + tok.path() +
                                " has no BOS piece; documents need one");
  }

  std::vector<std::string> texts;
  texts.reserve(o.inputs.size());
  TokenizeStats stats;
  for (const std::string& path : o.inputs) {
    HPOD_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
    stats.bytes_read += static_cast<int64_t>(text.size());
    texts.push_back(std::move(text));
  }
  // 2^64 * fraction as the threshold of the split hash; fraction < 1 fits.
  const auto threshold = static_cast<uint64_t>(std::ldexp(split ? o.val_fraction : 0.0, 64));
  std::vector<Document> docs;
  for (const std::string& text : texts) {
    std::string_view rest = text;
    while (!rest.empty()) {
      const size_t nl = rest.find('\n');
      std::string_view line = rest.substr(0, nl);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (!IsBlank(line)) {
        const uint64_t h = SplitMix64Mix(o.val_seed ^ SplitMix64Mix(docs.size()));
        docs.push_back({line, split && h < threshold});
      }
      if (nl == std::string_view::npos) break;
      rest.remove_prefix(nl + 1);
    }
  }
  std::vector<Chunk> chunks;
  for (size_t d = 0; d < docs.size();) {
    Chunk c;
    c.begin = d;
    while (d < docs.size() && c.bytes < std::max<int64_t>(1, o.chunk_bytes)) {
      c.bytes += static_cast<int64_t>(docs[d].text.size()) + 1;
      ++d;
    }
    c.end = d;
    chunks.push_back(std::move(c));
  }

  // Workers take chunks in order; results land in their chunk's slot.
  std::atomic<size_t> next{0};
  std::mutex progress_mu;
  TokenizeStats running;  // GUARDED_BY(progress_mu)
  const auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < chunks.size();) {
      Chunk& c = chunks[i];
      for (size_t d = c.begin; d < c.end && c.status.ok(); ++d) {
        auto ids = tok.Encode(docs[d].text);
        if (!ids.ok()) {
          c.status = ids.status();
          break;
        }
        std::vector<int32_t>& out = docs[d].val ? c.val : c.train;
        out.push_back(tok.bos_id());
        out.insert(out.end(), ids->begin(), ids->end());
        ++(docs[d].val ? c.val_documents : c.train_documents);
      }
      if (progress) {
        std::lock_guard<std::mutex> lock(progress_mu);
        running.bytes_read += c.bytes;
        running.tokens += static_cast<int64_t>(c.train.size() + c.val.size());
        running.seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        progress(running);
      }
    }
  };
  const int threads = std::clamp<int>(o.threads, 1, std::max<int>(1, chunks.size()));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();

  std::vector<int32_t> train, val;
  for (Chunk& c : chunks) {
    if (!c.status.ok()) return c.status;
    train.insert(train.end(), c.train.begin(), c.train.end());
    val.insert(val.end(), c.val.begin(), c.val.end());
    stats.train_documents += c.train_documents;
    stats.val_documents += c.val_documents;
  }
  const auto vocab = static_cast<uint32_t>(tok.vocab_size());
  HPOD_RETURN_IF_ERROR(WriteShard(o.output, vocab, train));
  if (split) HPOD_RETURN_IF_ERROR(WriteShard(o.val_output, vocab, val));
  stats.documents = static_cast<int64_t>(docs.size());
  stats.train_tokens = static_cast<int64_t>(train.size());
  stats.val_tokens = static_cast<int64_t>(val.size());
  stats.tokens = stats.train_tokens + stats.val_tokens;
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return stats;
}

}  // namespace hpod::train::data
