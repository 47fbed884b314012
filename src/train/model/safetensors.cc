#include "hpod/train/model/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "fmt/format.h"

namespace hpod::train::model {

// The data section is copied byte for byte into host floats.
static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");

namespace {

// Element sizes of every dtype the safetensors spec defines.
int64_t SpecDTypeSize(std::string_view name) {
  static const std::unordered_map<std::string_view, int64_t> kSizes = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  auto it = kSizes.find(name);
  return it == kSizes.end() ? 0 : it->second;
}

DType DTypeFromSpecName(std::string_view name) {
  if (name == "F32") return DType::kF32;
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  return DType::kOther;
}

std::string Errno(int err) { return std::strerror(err); }

Status WriteAll(int fd, const void* buf, size_t n, const std::string& path) {
  const char* p = static_cast<const char*>(buf);
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return InternalError(fmt::format("writing {}: {}", path, Errno(errno)));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return OkStatus();
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kOther:
      break;
  }
  return "other";
}

std::string_view TorchDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "float32";
    case DType::kBF16:
      return "bfloat16";
    case DType::kF16:
      return "float16";
    case DType::kOther:
      break;
  }
  return "other";
}

StatusOr<DType> ParseDType(std::string_view name) {
  std::string s(name);
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  if (s == "f32" || s == "fp32" || s == "float32") return DType::kF32;
  if (s == "bf16" || s == "bfloat16") return DType::kBF16;
  if (s == "f16" || s == "fp16" || s == "float16") return DType::kF16;
  return InvalidArgumentError(
      fmt::format("dtype '{}' is not supported; use float32, bfloat16 or float16", name));
}

uint16_t F32ToBF16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN: keep sign and payload top, quiet
  }
  // Round to nearest even: add 0x7fff plus the lowest kept bit. Overflow
  // carries into the exponent and reaches inf exactly when it should.
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float BF16ToF32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t F32ToF16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) {  // NaN: quiet, top payload bits kept
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  // 65520 is halfway between 65504 (the largest half) and 65536; the tie goes
  // to the even neighbour, which is inf.
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  const uint32_t exp = abs >> 23;
  if (exp < 113) {  // below 2^-14: a half subnormal (units of 2^-24) or zero
    const uint32_t shift = 126 - exp;
    if (shift > 24) return sign;  // below 2^-25: rounds to zero
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1u))) ++q;  // may carry into the smallest normal
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = ((exp - 112) << 10) | ((abs >> 13) & 0x3ffu);
  const uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // carry may bump the exponent
  return static_cast<uint16_t>(sign | h);
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in fp32.
    float v = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

// Owns the mmap; unmapped when the last SafetensorsFile copy goes away.
struct SafetensorsFile::Mapping {
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr != nullptr) ::munmap(addr, size);
  }
};

StatusOr<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFoundError(fmt::format("{}: no such file", path));
    return InternalError(fmt::format("opening {}: {}", path, Errno(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return InternalError(fmt::format("stat {}: {}", path, Errno(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return InvalidArgumentError(fmt::format("{}: not a regular file", path));
  }
  const int64_t size = st.st_size;
  if (size < 8) {
    ::close(fd);
    return DataLossError(
        fmt::format("{}: {} bytes is too short for a safetensors header (truncated?)", path, size));
  }
  auto mapping = std::make_shared<Mapping>();
  void* addr = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_SHARED, fd, 0);
  int map_err = errno;
  ::close(fd);
  if (addr == MAP_FAILED) {
    return InternalError(fmt::format("mapping {}: {}", path, Errno(map_err)));
  }
  mapping->addr = addr;
  mapping->size = static_cast<size_t>(size);
  const auto* bytes = static_cast<const unsigned char*>(addr);

  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);
  if (header_len > static_cast<uint64_t>(kMaxHeaderBytes)) {
    return DataLossError(fmt::format("{}: header length {} exceeds the {} byte limit (corrupt?)",
                                     path, header_len, kMaxHeaderBytes));
  }
  if (header_len > static_cast<uint64_t>(size - 8)) {
    return DataLossError(fmt::format(
        "{}: header length {} exceeds the file's {} bytes (truncated?)", path, header_len, size));
  }
  const char* header = reinterpret_cast<const char*>(bytes + 8);
  nlohmann::json j = nlohmann::json::parse(header, header + header_len, nullptr,
                                           /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return DataLossError(fmt::format("{}: header is not a JSON object", path));
  }

  SafetensorsFile file;
  file.path_ = path;
  const int64_t data_size = size - 8 - static_cast<int64_t>(header_len);
  for (const auto& [name, value] : j.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) {
        return DataLossError(fmt::format("{}: __metadata__ is not a JSON object", path));
      }
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) {
          return DataLossError(
              fmt::format("{}: __metadata__ value for '{}' is not a string", path, k));
        }
      }
      file.metadata_ = value;
      continue;
    }
    auto bad = [&](std::string_view what) {
      return DataLossError(fmt::format("{}: tensor {}: {}", path, name, what));
    };
    if (!value.is_object()) return bad("entry is not a JSON object");
    auto dt = value.find("dtype");
    auto sh = value.find("shape");
    auto off = value.find("data_offsets");
    if (dt == value.end() || !dt->is_string()) return bad("missing dtype");
    if (sh == value.end() || !sh->is_array()) return bad("missing shape");
    if (off == value.end() || !off->is_array() || off->size() != 2) {
      return bad("data_offsets must be [begin, end]");
    }
    SafetensorsEntry e;
    e.name = name;
    e.dtype_name = dt->get<std::string>();
    const int64_t elem_size = SpecDTypeSize(e.dtype_name);
    if (elem_size == 0) {
      return InvalidArgumentError(
          fmt::format("{}: tensor {} has unknown dtype \"{}\"", path, name, e.dtype_name));
    }
    e.dtype = DTypeFromSpecName(e.dtype_name);
    int64_t numel = 1;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned()) return bad(fmt::format("shape {} is invalid", sh->dump()));
      uint64_t dim = d.get<uint64_t>();
      if (dim > (uint64_t{1} << 48) ||
          __builtin_mul_overflow(numel, static_cast<int64_t>(dim), &numel)) {
        return bad(fmt::format("shape {} is too large", sh->dump()));
      }
      e.shape.push_back(static_cast<int64_t>(dim));
    }
    e.numel = numel;
    const auto& b = (*off)[0];
    const auto& en = (*off)[1];
    if (!b.is_number_unsigned() || !en.is_number_unsigned() ||
        b.get<uint64_t>() > en.get<uint64_t>()) {
      return bad(fmt::format("data_offsets {} are invalid", off->dump()));
    }
    if (en.get<uint64_t>() > static_cast<uint64_t>(data_size)) {
      return bad(fmt::format("data_offsets {} exceed the {} byte data section (truncated?)",
                             off->dump(), data_size));
    }
    e.begin = static_cast<int64_t>(b.get<uint64_t>());
    e.end = static_cast<int64_t>(en.get<uint64_t>());
    int64_t bytes_needed = 0;
    if (__builtin_mul_overflow(numel, elem_size, &bytes_needed)) {
      return bad(fmt::format("shape {} is too large", sh->dump()));
    }
    if (bytes_needed != e.end - e.begin) {
      return bad(fmt::format("{} shape {} needs {} bytes but data_offsets span {}", e.dtype_name,
                             ShapeString(e.shape), bytes_needed, e.end - e.begin));
    }
    file.entries_.push_back(std::move(e));
  }
  std::sort(file.entries_.begin(), file.entries_.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  for (size_t i = 1; i < file.entries_.size(); ++i) {
    const auto& prev = file.entries_[i - 1];
    const auto& cur = file.entries_[i];
    if (cur.begin < prev.end) {
      return DataLossError(fmt::format("{}: tensors {} and {} overlap (bytes {}..{} and {}..{})",
                                       path, prev.name, cur.name, prev.begin, prev.end, cur.begin,
                                       cur.end));
    }
  }
  for (size_t i = 0; i < file.entries_.size(); ++i) file.index_[file.entries_[i].name] = i;
  file.data_ = bytes + 8 + header_len;
  file.mapping_ = std::move(mapping);
  return file;
}

const SafetensorsEntry* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Status SafetensorsFile::ReadF32(std::string_view name, std::span<float> out) const {
  const SafetensorsEntry* e = Find(name);
  if (e == nullptr) return NotFoundError(fmt::format("{} lacks tensor {}", path_, name));
  if (static_cast<int64_t>(out.size()) != e->numel) {
    return InvalidArgumentError(fmt::format("{}: tensor {} has {} elements, expected {}", path_,
                                            name, e->numel, out.size()));
  }
  const unsigned char* src = data_ + e->begin;
  switch (e->dtype) {
    case DType::kF32:
      if (e->numel > 0) std::memcpy(out.data(), src, static_cast<size_t>(e->numel) * 4);
      return OkStatus();
    case DType::kBF16:
    case DType::kF16: {
      const bool bf16 = e->dtype == DType::kBF16;
      for (int64_t i = 0; i < e->numel; ++i) {
        uint16_t v;
        std::memcpy(&v, src + 2 * i, 2);  // the data section need not be 2-byte aligned
        out[i] = bf16 ? BF16ToF32(v) : F16ToF32(v);
      }
      return OkStatus();
    }
    case DType::kOther:
      break;
  }
  return InvalidArgumentError(fmt::format(
      "{}: tensor {} has dtype {}; hpod-train reads F32, BF16, F16", path_, name, e->dtype_name));
}

Status WriteSafetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                        DType dtype, const std::map<std::string, std::string>& metadata) {
  if (dtype == DType::kOther) {
    return InvalidArgumentError(fmt::format("writing {}: dtype must be F32, BF16 or F16", path));
  }
  const int64_t elem_size = dtype == DType::kF32 ? 4 : 2;
  nlohmann::json header = nlohmann::json::object();
  std::vector<int64_t> numels;
  int64_t offset = 0;
  std::set<std::string_view> seen;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !seen.insert(t.name).second) {
      return InvalidArgumentError(
          fmt::format("writing {}: tensor name '{}' is empty, reserved or repeated", path, t.name));
    }
    int64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0 || __builtin_mul_overflow(numel, d, &numel)) {
        return InvalidArgumentError(fmt::format("writing {}: tensor {} has invalid shape {}", path,
                                                t.name, ShapeString(t.shape)));
      }
    }
    if (numel > 0 && t.data == nullptr) {
      return InvalidArgumentError(fmt::format("writing {}: tensor {} has no data", path, t.name));
    }
    numels.push_back(numel);
    header[t.name] = {{"dtype", DTypeName(dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + numel * elem_size}}};
    offset += numel * elem_size;
  }
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {  // names that are not valid UTF-8
    return InvalidArgumentError(fmt::format("writing {}: {}", path, e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_len = text.size();

  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError(fmt::format("creating {}: {}", tmp, Errno(errno)));
  auto write_body = [&]() -> Status {
    HPOD_RETURN_IF_ERROR(WriteAll(fd, &header_len, 8, tmp));
    HPOD_RETURN_IF_ERROR(WriteAll(fd, text.data(), text.size(), tmp));
    std::vector<uint16_t> buf;
    constexpr int64_t kChunk = 1 << 16;
    for (size_t t = 0; t < tensors.size(); ++t) {
      const float* src = tensors[t].data;
      if (dtype == DType::kF32) {
        HPOD_RETURN_IF_ERROR(WriteAll(fd, src, static_cast<size_t>(numels[t]) * 4, tmp));
        continue;
      }
      for (int64_t i = 0; i < numels[t]; i += kChunk) {
        const int64_t n = std::min(kChunk, numels[t] - i);
        buf.resize(static_cast<size_t>(n));
        for (int64_t k = 0; k < n; ++k) {
          buf[k] = dtype == DType::kBF16 ? F32ToBF16(src[i + k]) : F32ToF16(src[i + k]);
        }
        HPOD_RETURN_IF_ERROR(WriteAll(fd, buf.data(), buf.size() * 2, tmp));
      }
    }
    if (::fsync(fd) != 0) return InternalError(fmt::format("fsync {}: {}", tmp, Errno(errno)));
    return OkStatus();
  };
  Status s = write_body();
  if (::close(fd) != 0 && s.ok()) {
    s = InternalError(fmt::format("closing {}: {}", tmp, Errno(errno)));
  }
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    s = InternalError(fmt::format("renaming {} to {}: {}", tmp, path, Errno(errno)));
  }
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  // Make the rename durable.
  std::string dir = std::filesystem::path(path).parent_path().string();
  int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return OkStatus();
}

}  // namespace hpod::train::model
