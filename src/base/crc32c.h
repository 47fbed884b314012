// CRC-32C (Castagnoli), as used by tfevents records and checkpoint tensors.
//
// Thread contract: pure functions, safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace hpod {

// Extends `crc` (0 for a fresh checksum) with `size` bytes. Uses SSE4.2 when
// the CPU has it, a table otherwise; both give the same value.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t size);
inline uint32_t Crc32c(const void* data, size_t size) { return Crc32cExtend(0, data, size); }
inline uint32_t Crc32c(std::string_view s) { return Crc32c(s.data(), s.size()); }

// TensorFlow's masking, so a CRC stored beside data that holds CRCs stays
// distinguishable from them (record_writer.cc).
inline uint32_t MaskCrc32c(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace hpod
