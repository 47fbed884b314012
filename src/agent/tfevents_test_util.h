#pragma once

// A hand-written encoder of TensorBoard event records for the agent's tests (the
// agent may not link src/train, whose tfevents.h writes the real ones; the
// fixture in testdata/hpod_train_run holds what it wrote).
//
// Thread contract: pure functions.

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hpod/base/crc32c.h"

namespace hpod::agent::testing {

inline void Varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
inline void Fixed(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xFF);
}
inline void Key(std::string& out, uint32_t field, uint32_t wire) {
  Varint(out, (field << 3) | wire);
}
inline void Bytes(std::string& out, uint32_t field, std::string_view b) {
  Key(out, field, 2);
  Varint(out, b.size());
  out += b;
}
// A Summary.Value with a simple_value.
inline std::string Value(const std::string& tag, float v) {
  std::string value;
  Bytes(value, 1, tag);
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  Key(value, 2, 5);
  Fixed(value, bits, 4);
  return value;
}
inline std::string Event(double wall_time, int64_t step, const std::vector<std::string>& values,
                         const std::string& extra = "") {
  std::string summary, event;
  for (const auto& v : values) Bytes(summary, 1, v);
  uint64_t bits;
  std::memcpy(&bits, &wall_time, 8);
  Key(event, 1, 1);
  Fixed(event, bits, 8);
  Key(event, 2, 0);
  Varint(event, static_cast<uint64_t>(step));
  event += extra;
  Bytes(event, 5, summary);
  return event;
}
inline std::string Record(std::string_view data) {
  std::string r;
  Fixed(r, data.size(), 8);
  Fixed(r, MaskCrc32c(Crc32c(r.data(), 8)), 4);
  r += data;
  Fixed(r, MaskCrc32c(Crc32c(data)), 4);
  return r;
}
// The file_version record a writer starts with.
inline std::string FileVersion(double wall_time) {
  std::string e;
  uint64_t bits;
  std::memcpy(&bits, &wall_time, 8);
  Key(e, 1, 1);
  Fixed(e, bits, 8);
  Bytes(e, 3, "brain.Event:2");
  return Record(e);
}
// An event file of one scalar tag: (step, value) pairs, wall time 1000 + step.
inline std::string ScalarFile(const std::string& tag,
                              const std::vector<std::pair<int64_t, float>>& points,
                              double created = 1000) {
  std::string file = FileVersion(created);
  for (const auto& [step, v] : points) {
    file += Record(Event(1000.0 + static_cast<double>(step), step, {Value(tag, v)}));
  }
  return file;
}

}  // namespace hpod::agent::testing
