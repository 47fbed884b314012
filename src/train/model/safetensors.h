// Reading and writing safetensors files (the Hugging Face weight format).
//
// Layout (training-building-blocks.md §11): u64 little-endian header length N,
// N bytes of JSON {"<name>": {"dtype", "shape", "data_offsets": [begin, end]},
// "__metadata__": {"k": "v"}}, then the raw little-endian tensor bytes; offsets
// are relative to the first byte after the header. hpod-train computes in fp32
// and stores F32, BF16 or F16; other dtypes are listed but cannot be read.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::train::model {

// kOther: a dtype valid in safetensors that hpod-train does not convert (I64,
// F64, U8, F8_E4M3, ...); SafetensorsEntry::dtype_name says which. Writers reject it.
enum class DType { kF32, kBF16, kF16, kOther };

// "F32", "BF16", "F16" (the safetensors spelling); "other" for kOther.
std::string_view DTypeName(DType dtype);
// "float32", "bfloat16", "float16" (config.json's torch_dtype); "other" for kOther.
std::string_view TorchDTypeName(DType dtype);
// Parses "f32"/"F32"/"float32"/"fp32", "bf16"/"bfloat16", "f16"/"fp16"/"float16";
// anything else is an InvalidArgumentError naming the value.
StatusOr<DType> ParseDType(std::string_view name);

// Scalar conversions, exposed for the checkpoint code and the tests. Narrowing
// rounds to nearest, ties to even (as PyTorch and numpy do); values beyond the
// target's range become ±inf, NaN stays NaN (quiet), F16 subnormals are exact.
// Widening is exact for every bit pattern (NaN payloads kept).
uint16_t F32ToBF16(float f);
float BF16ToF32(uint16_t b);
uint16_t F32ToF16(float f);
float F16ToF32(uint16_t h);

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::string dtype_name;      // as in the header, e.g. "BF16" or "I64"
  std::vector<int64_t> shape;  // row-major; [] is a scalar
  int64_t numel = 0;
  int64_t begin = 0;  // byte offsets relative to the start of the data section
  int64_t end = 0;
};

// A memory-mapped safetensors file whose header was validated on Open.
//
// Thread contract: immutable after Open; concurrent reads from any number of
// threads are safe. Copies share the mapping, which lives until the last copy
// is destroyed.
class SafetensorsFile {
 public:
  // The header may not exceed this many bytes (the Rust reference uses 100 MB);
  // a larger claimed length means a corrupt or hostile file.
  static constexpr int64_t kMaxHeaderBytes = 100'000'000;

  // Maps `path` and validates the header: length within the file and below
  // kMaxHeaderBytes, a JSON object, every entry with a known dtype, a shape of
  // non-negative dims, data_offsets within the data section, non-overlapping,
  // and end - begin == numel * dtype size. Errors (one line, naming the file
  // and, where one is at fault, the tensor): NotFoundError for a missing file,
  // DataLossError for a truncated or inconsistent file, InvalidArgumentError
  // for a dtype unknown to safetensors.
  static StatusOr<SafetensorsFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  // In data-offset order.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  // The "__metadata__" object ({} when absent); values are strings.
  const nlohmann::json& metadata() const { return metadata_; }
  // nullptr when there is no tensor of that name.
  const SafetensorsEntry* Find(std::string_view name) const;

  // Converts the tensor to fp32 into `out`, whose size must equal its numel.
  // NotFoundError for an unknown name; InvalidArgumentError for a size
  // mismatch or a dtype other than F32/BF16/F16 ("tensor X has dtype F64;
  // hpod-train reads F32, BF16, F16").
  Status ReadF32(std::string_view name, std::span<float> out) const;

 private:
  struct Mapping;
  std::string path_;
  std::shared_ptr<const Mapping> mapping_;
  const unsigned char* data_ = nullptr;  // first byte after the header
  std::vector<SafetensorsEntry> entries_;
  std::unordered_map<std::string, size_t> index_;  // name → entries_ position
  nlohmann::json metadata_ = nlohmann::json::object();
};

struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // numel(shape) floats
};

// Writes `tensors` (in this order) converted to `dtype`, with `metadata` as
// "__metadata__". The header is padded with spaces to a multiple of 8 so the
// data section is aligned. Atomic: written to "<path>.tmp.<pid>", fsynced and
// renamed over `path`, then the directory is fsynced; on error nothing is left
// behind. InvalidArgumentError for an empty, duplicate or reserved name, a
// negative dim or dtype kOther; InternalError for I/O failures (naming the path).
Status WriteSafetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                        DType dtype, const std::map<std::string, std::string>& metadata);

}  // namespace hpod::train::model
