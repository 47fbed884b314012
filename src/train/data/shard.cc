#include "hpod/train/data/shard.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <unordered_map>
#include <vector>

#include "hpod/base/file_util.h"

namespace hpod::train::data {
namespace {

static_assert(std::endian::native == std::endian::little,
              "shards are little-endian; big-endian hosts need byte swaps here");

template <typename T>
void Put(unsigned char* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
T Get(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// The range check only: Verify() also hashes.
template <typename T>
int64_t FirstTokenAtOrAbove(const T* tokens, int64_t n, uint32_t vocab) {
  for (int64_t i = 0; i < n; ++i) {
    if (tokens[i] >= vocab) return i;
  }
  return -1;
}

}  // namespace

Status WriteShard(const std::string& path, uint32_t vocab_size, std::span<const int32_t> tokens) {
  if (vocab_size == 0) return InvalidArgumentError("shard " + path + ": vocab_size must be > 0");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || static_cast<uint32_t>(tokens[i]) >= vocab_size) {
      return InvalidArgumentError("shard " + path + ": token " + std::to_string(i) + " is " +
                                  std::to_string(tokens[i]) + ", outside [0, " +
                                  std::to_string(vocab_size) + ")");
    }
  }
  const uint32_t width = TokenBytesForVocab(vocab_size);
  std::string bytes(kShardHeaderBytes + tokens.size() * width, '\0');
  auto* header = reinterpret_cast<unsigned char*>(bytes.data());
  unsigned char* body = header + kShardHeaderBytes;
  if (width == 2) {
    for (size_t i = 0; i < tokens.size(); ++i) Put(body + i * 2, static_cast<uint16_t>(tokens[i]));
  } else {
    for (size_t i = 0; i < tokens.size(); ++i) Put(body + i * 4, static_cast<uint32_t>(tokens[i]));
  }
  std::memcpy(header, kShardMagic, sizeof(kShardMagic));
  Put<uint32_t>(header + 8, kShardVersion);
  Put<uint32_t>(header + 12, kShardHeaderBytes);
  Put<uint32_t>(header + 16, vocab_size);
  Put<uint32_t>(header + 20, width);
  Put<uint64_t>(header + 24, tokens.size());
  Put<uint64_t>(header + 32, XXH3_64bits(body, tokens.size() * width));
  return WriteFileAtomic(path, bytes);
}

StatusOr<Shard> Shard::Open(const std::string& path, bool verify_checksum) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "opening shard " + path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    Status s = ErrnoStatus(errno, "stat " + path);
    ::close(fd);
    return s;
  }
  const auto corrupt = [&](const std::string& what) {
    return DataLossError("shard " + path + " is corrupt: " + what);
  };
  const size_t size = static_cast<size_t>(st.st_size);
  if (size < kShardHeaderBytes) {
    ::close(fd);
    return corrupt("file has " + std::to_string(size) + " bytes, less than the " +
                   std::to_string(kShardHeaderBytes) + "-byte header");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);
  if (map == MAP_FAILED) return ErrnoStatus(map_errno, "mapping shard " + path);

  Shard shard;
  shard.path_ = path;
  shard.map_ = map;
  shard.map_bytes_ = size;
  const auto* h = static_cast<const unsigned char*>(map);
  if (std::memcmp(h, kShardMagic, sizeof(kShardMagic)) != 0) {
    return corrupt("bad magic (not an hpod token shard)");
  }
  const auto version = Get<uint32_t>(h + 8);
  if (version != kShardVersion) {
    return corrupt("unsupported version " + std::to_string(version) + " (this build reads " +
                   std::to_string(kShardVersion) + ")");
  }
  const auto header_bytes = Get<uint32_t>(h + 12);
  if (header_bytes != kShardHeaderBytes) {
    return corrupt("header_bytes is " + std::to_string(header_bytes) + ", expected " +
                   std::to_string(kShardHeaderBytes));
  }
  shard.vocab_size_ = Get<uint32_t>(h + 16);
  if (shard.vocab_size_ == 0) return corrupt("vocab_size is 0");
  shard.token_bytes_ = Get<uint32_t>(h + 20);
  if (shard.token_bytes_ != TokenBytesForVocab(shard.vocab_size_)) {
    return corrupt("token_bytes is " + std::to_string(shard.token_bytes_) + " for vocab_size " +
                   std::to_string(shard.vocab_size_) + ", expected " +
                   std::to_string(TokenBytesForVocab(shard.vocab_size_)));
  }
  for (uint32_t i = 40; i < kShardHeaderBytes; ++i) {
    if (h[i] != 0) return corrupt("reserved header byte " + std::to_string(i) + " is not zero");
  }
  const auto num_tokens = Get<uint64_t>(h + 24);
  const uint64_t body = size - kShardHeaderBytes;
  if (num_tokens > body / shard.token_bytes_ || num_tokens * shard.token_bytes_ != body) {
    return corrupt("header says " + std::to_string(num_tokens) + " tokens (" +
                   std::to_string(num_tokens * shard.token_bytes_) + " bytes) but the file has " +
                   std::to_string(body) + " bytes after the header (truncated or appended to)");
  }
  shard.num_tokens_ = static_cast<int64_t>(num_tokens);
  shard.checksum_ = Get<uint64_t>(h + 32);
  shard.tokens_ = h + kShardHeaderBytes;
  if (verify_checksum) HPOD_RETURN_IF_ERROR(shard.Verify());
  return shard;
}

Shard::Shard(Shard&& other) noexcept { *this = std::move(other); }

Shard& Shard::operator=(Shard&& other) noexcept {
  if (this != &other) {
    Unmap();
    path_ = std::move(other.path_);
    map_ = std::exchange(other.map_, nullptr);
    map_bytes_ = std::exchange(other.map_bytes_, 0);
    tokens_ = std::exchange(other.tokens_, nullptr);
    vocab_size_ = other.vocab_size_;
    token_bytes_ = other.token_bytes_;
    num_tokens_ = other.num_tokens_;
    checksum_ = other.checksum_;
  }
  return *this;
}

Shard::~Shard() { Unmap(); }

void Shard::Unmap() {
  if (map_ != nullptr) ::munmap(map_, map_bytes_);
  map_ = nullptr;
}

void Shard::CopyTokens(int64_t begin, int64_t n, int32_t* out) const {
  if (token_bytes_ == 2) {
    const auto* t = reinterpret_cast<const uint16_t*>(tokens_) + begin;
    for (int64_t i = 0; i < n; ++i) out[i] = t[i];
  } else {
    const auto* t = reinterpret_cast<const uint32_t*>(tokens_) + begin;
    for (int64_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(t[i]);
  }
}

Status Shard::Verify() const {
  const uint64_t actual = XXH3_64bits(tokens_, static_cast<size_t>(num_tokens_) * token_bytes_);
  if (actual != checksum_) {
    char buf[80];
    std::snprintf(buf, sizeof(buf), "checksum mismatch (header %016llx, tokens hash to %016llx)",
                  static_cast<unsigned long long>(checksum_),
                  static_cast<unsigned long long>(actual));
    return DataLossError("shard " + path_ + " is corrupt: " + buf);
  }
  // Only 4-byte shards and vocabularies below 65536 can hold out-of-range tokens.
  int64_t bad = -1;
  if (token_bytes_ == 2 && vocab_size_ < 65536) {
    bad = FirstTokenAtOrAbove(reinterpret_cast<const uint16_t*>(tokens_), num_tokens_, vocab_size_);
  } else if (token_bytes_ == 4) {
    bad = FirstTokenAtOrAbove(reinterpret_cast<const uint32_t*>(tokens_), num_tokens_, vocab_size_);
  }
  if (bad >= 0) {
    return DataLossError("shard " + path_ + " is corrupt: token " + std::to_string(bad) + " is " +
                         std::to_string(token(bad)) + ", not below vocab_size " +
                         std::to_string(vocab_size_));
  }
  return OkStatus();
}

double UnigramEntropy(const Shard& s) {
  const int64_t n = s.num_tokens();
  if (n == 0) return 0.0;
  std::vector<int64_t> counts;
  std::unordered_map<uint32_t, int64_t> sparse;  // only for huge vocabularies
  const bool dense = s.vocab_size() <= (1u << 24);
  if (dense) counts.assign(s.vocab_size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    const auto t = static_cast<uint32_t>(s.token(i));
    if (dense && t < counts.size()) {
      ++counts[t];
    } else {
      ++sparse[t];
    }
  }
  double h = 0.0;
  const double inv_n = 1.0 / static_cast<double>(n);
  const auto add = [&](int64_t c) {
    if (c == 0) return;
    const double p = static_cast<double>(c) * inv_n;
    h -= p * std::log(p);
  };
  for (int64_t c : counts) add(c);
  for (const auto& [t, c] : sparse) add(c);
  return h;
}

}  // namespace hpod::train::data
