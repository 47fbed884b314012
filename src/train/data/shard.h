// Binary token shards: the on-disk form of a tokenized corpus.
//
// Layout (all little-endian), version 1:
//   offset  size  field
//        0     8  magic "HPODTOK\0"
//        8     4  u32 version (1)
//       12     4  u32 header_bytes (64): tokens start here
//       16     4  u32 vocab_size: every token is < vocab_size
//       20     4  u32 token_bytes: 2 when vocab_size <= 65536, else 4 (unsigned)
//       24     8  u64 num_tokens
//       32     8  u64 XXH3-64 (seed 0) of the token bytes [64, 64 + num_tokens * token_bytes)
//       40    24  zero (reserved; a reader rejects non-zero bytes so a later
//                 version cannot be misread as this one)
//       64     …  the tokens; the file ends exactly after the last one.
// A shard is written to "<path>.tmp", fsynced and renamed over <path> (then the
// directory is fsynced), so a reader never sees a half-written shard.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "hpod/base/status.h"

namespace hpod::train::data {

inline constexpr char kShardMagic[8] = {'H', 'P', 'O', 'D', 'T', 'O', 'K', '\0'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr uint32_t kShardHeaderBytes = 64;

// Bytes per token a shard of this vocabulary uses (2 or 4).
inline uint32_t TokenBytesForVocab(uint32_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

// Writes `tokens` as a shard at `path` (atomically, see above). InvalidArgument
// when vocab_size is 0 or a token is outside [0, vocab_size); the I/O error
// naming the file otherwise. Thread-safe for distinct paths.
Status WriteShard(const std::string& path, uint32_t vocab_size, std::span<const int32_t> tokens);

// A read-only memory map of one shard.
//
// Thread contract: immutable after Open; safe for concurrent reads from any
// number of threads. Movable, not copyable; the mapping lives as long as the
// object.
class Shard {
 public:
  // Maps `path` and validates the header: magic, version, header size, vocab
  // and token width, reserved bytes and that the file size equals header +
  // num_tokens * token_bytes. With `verify_checksum` it also hashes the tokens
  // (XXH3 runs at GB/s, a few ms for a typical corpus) and checks each is
  // < vocab_size. Every mismatch is a DataLossError whose message names the file
  // and the field; a missing file is NotFound.
  static StatusOr<Shard> Open(const std::string& path, bool verify_checksum);

  Shard(Shard&& other) noexcept;
  Shard& operator=(Shard&& other) noexcept;
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;
  ~Shard();

  const std::string& path() const { return path_; }
  uint32_t vocab_size() const { return vocab_size_; }
  uint32_t token_bytes() const { return token_bytes_; }
  int64_t num_tokens() const { return num_tokens_; }
  // The checksum recorded in the header.
  uint64_t checksum() const { return checksum_; }

  // Token i; precondition 0 <= i < num_tokens().
  int32_t token(int64_t i) const {
    return token_bytes_ == 2 ? static_cast<int32_t>(reinterpret_cast<const uint16_t*>(tokens_)[i])
                             : static_cast<int32_t>(reinterpret_cast<const uint32_t*>(tokens_)[i]);
  }
  // Copies tokens [begin, begin + n) into out; precondition: in range.
  void CopyTokens(int64_t begin, int64_t n, int32_t* out) const;

  // Recomputes the checksum over the mapped tokens and checks the token range;
  // DataLossError naming the file on a mismatch. Open(…, true) calls this.
  Status Verify() const;

 private:
  Shard() = default;
  void Unmap();

  std::string path_;
  void* map_ = nullptr;  // the whole file, PROT_READ
  size_t map_bytes_ = 0;
  const unsigned char* tokens_ = nullptr;  // map_ + header_bytes
  uint32_t vocab_size_ = 0;
  uint32_t token_bytes_ = 0;
  int64_t num_tokens_ = 0;
  uint64_t checksum_ = 0;
};

// Unigram entropy of the shard's tokens in nats/token: -sum p(t) ln p(t) with
// p the empirical token frequencies. This is the cross-entropy of the best
// context-free model, the baseline a trained language model must beat. 0 for
// an empty shard.
double UnigramEntropy(const Shard& s);

}  // namespace hpod::train::data
