#include "hpod/agent/event_file.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "hpod/base/crc32c.h"
#include "hpod/base/file_util.h"

namespace hpod::agent {
namespace {

// ---- protobuf wire format (only what an Event needs) ----

constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

bool ReadVarint(std::string_view& in, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (in.empty()) return false;
    const auto b = static_cast<uint8_t>(in.front());
    in.remove_prefix(1);
    *v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;  // more than 10 bytes
}

uint64_t LittleEndian(const char* bytes, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(bytes[i]);
  return v;
}

bool ReadFixed(std::string_view& in, size_t n, uint64_t* v) {
  if (in.size() < n) return false;
  *v = LittleEndian(in.data(), n);
  in.remove_prefix(n);
  return true;
}

bool ReadBytes(std::string_view& in, std::string_view* out) {
  uint64_t len;
  if (!ReadVarint(in, &len) || len > in.size()) return false;
  *out = in.substr(0, len);
  in.remove_prefix(len);
  return true;
}

// Reads one field's key; false at the end or on a malformed key.
bool ReadKey(std::string_view& in, uint32_t* field, uint32_t* wire_type) {
  uint64_t key;
  if (!ReadVarint(in, &key)) return false;
  *field = static_cast<uint32_t>(key >> 3);
  *wire_type = static_cast<uint32_t>(key & 7);
  return *field != 0;
}

// Skips a field of an unknown number. Groups (wire types 3, 4) are refused: no
// tensorboard message has had them.
bool SkipField(std::string_view& in, uint32_t wire_type) {
  uint64_t ignored;
  std::string_view bytes;
  switch (wire_type) {
    case kVarint:
      return ReadVarint(in, &ignored);
    case kFixed64:
      return ReadFixed(in, 8, &ignored);
    case kLengthDelimited:
      return ReadBytes(in, &bytes);
    case kFixed32:
      return ReadFixed(in, 4, &ignored);
    default:
      return false;
  }
}

// Summary.Value: tag = 1, simple_value = 2. False when malformed; `has_simple`
// says whether it was a scalar.
bool DecodeValue(std::string_view in, std::string_view* tag, float* value, bool* has_simple) {
  *has_simple = false;
  uint32_t field, wire;
  while (!in.empty()) {
    if (!ReadKey(in, &field, &wire)) return false;
    if (field == 1 && wire == kLengthDelimited) {
      if (!ReadBytes(in, tag)) return false;
    } else if (field == 2 && wire == kFixed32) {
      uint64_t bits;
      if (!ReadFixed(in, 4, &bits)) return false;
      const auto b32 = static_cast<uint32_t>(bits);
      std::memcpy(value, &b32, sizeof(*value));
      *has_simple = true;
    } else if (!SkipField(in, wire)) {
      return false;
    }
  }
  return true;
}

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::vector<std::pair<std::string_view, float>> values;  // into the record
};

// Event: wall_time = 1, step = 2, summary = 5 (Summary.value = 1, repeated). The
// step may follow the summary, so values are collected first.
bool DecodeEvent(std::string_view in, Event* out) {
  uint32_t field, wire;
  while (!in.empty()) {
    if (!ReadKey(in, &field, &wire)) return false;
    if (field == 1 && wire == kFixed64) {
      uint64_t bits;
      if (!ReadFixed(in, 8, &bits)) return false;
      std::memcpy(&out->wall_time, &bits, sizeof(out->wall_time));
    } else if (field == 2 && wire == kVarint) {
      uint64_t v;
      if (!ReadVarint(in, &v)) return false;
      out->step = static_cast<int64_t>(v);  // int64: two's complement
    } else if (field == 5 && wire == kLengthDelimited) {
      std::string_view summary;
      if (!ReadBytes(in, &summary)) return false;
      while (!summary.empty()) {
        if (!ReadKey(summary, &field, &wire)) return false;
        if (field != 1 || wire != kLengthDelimited) {
          if (!SkipField(summary, wire)) return false;
          continue;
        }
        std::string_view v, tag;
        float value = 0;
        bool scalar;
        if (!ReadBytes(summary, &v) || !DecodeValue(v, &tag, &value, &scalar)) return false;
        if (scalar && !tag.empty()) out->values.emplace_back(tag, value);
      }
    } else if (!SkipField(in, wire)) {
      return false;
    }
  }
  return true;
}

constexpr size_t kHeader = 12, kFooter = 4;

// The bytes of a source not yet decoded: at most about one chunk plus one record.
class Window {
 public:
  Window(const ByteSource& source, const EventStreamOptions& o, EventStreamStats* stats)
      : source_(source), o_(o), stats_(*stats) {}

  // Makes `need` bytes available (fewer only at the end or the budget).
  Status Fill(size_t need) {
    while (size() < need && !end_) {
      // Decoded bytes go once they are half the buffer (amortised O(1) per byte).
      if (pos_ > 0 && pos_ >= buf_.size() / 2) {
        buf_.erase(0, pos_);
        pos_ = 0;
      }
      const int64_t left = o_.max_bytes - stats_.bytes_read;
      if (left <= 0) {
        stats_.budget_reached = true;
        end_ = true;
        break;
      }
      const size_t want = static_cast<size_t>(
          std::min<int64_t>(left, static_cast<int64_t>(std::max(o_.chunk_bytes, need - size()))));
      const size_t old = buf_.size();
      buf_.resize(old + want);
      StatusOr<size_t> n = source_(buf_.data() + old, want);
      buf_.resize(old + (n.ok() ? *n : 0));
      if (!n.ok()) return n.status();
      stats_.bytes_read += static_cast<int64_t>(*n);
      if (*n == 0) end_ = true;
    }
    return OkStatus();
  }
  size_t size() const { return buf_.size() - pos_; }
  const char* data() const { return buf_.data() + pos_; }
  void Consume(size_t n) { pos_ += n; }
  // The file offset of data().
  int64_t offset() const {
    return o_.start_offset + stats_.bytes_read - static_cast<int64_t>(size());
  }

 private:
  const ByteSource& source_;
  const EventStreamOptions& o_;
  EventStreamStats& stats_;
  std::string buf_;
  size_t pos_ = 0;
  bool end_ = false;
};

}  // namespace

StatusOr<EventStreamStats> DecodeEventStream(const ByteSource& source, const EventStreamOptions& o,
                                             const ScalarSink& on_scalar) {
  EventStreamStats stats;
  Window w(source, o, &stats);
  bool synced = !o.resync;
  const std::string at = " in the record at offset ";
  for (int64_t records = 0; o.max_records == 0 || records < o.max_records;) {
    HPOD_RETURN_IF_ERROR(w.Fill(kHeader));
    if (w.size() < kHeader) break;  // the end, or a torn header
    const uint64_t length = LittleEndian(w.data(), 8);
    if (MaskCrc32c(Crc32c(w.data(), 8)) != LittleEndian(w.data() + 8, 4)) {
      if (!synced) {
        w.Consume(1);
        ++stats.resync_skipped;
        continue;
      }
      stats.corruption = "bad length checksum" + at + std::to_string(w.offset());
      break;
    }
    const int64_t record_offset = w.offset();
    if (length > o.max_record_bytes) {
      // Too large to hold: its checksum is computed chunk by chunk. (A length whose
      // checksum holds is taken as a record boundary when resynchronising.)
      synced = true;
      w.Consume(kHeader);
      uint32_t crc = 0;
      for (uint64_t left = length; left > 0;) {
        HPOD_RETURN_IF_ERROR(w.Fill(static_cast<size_t>(std::min<uint64_t>(left, o.chunk_bytes))));
        if (w.size() == 0) return stats;  // torn
        const size_t take = static_cast<size_t>(std::min<uint64_t>(left, w.size()));
        crc = Crc32cExtend(crc, w.data(), take);
        w.Consume(take);
        left -= take;
      }
      HPOD_RETURN_IF_ERROR(w.Fill(kFooter));
      if (w.size() < kFooter) break;  // torn
      if (MaskCrc32c(crc) != LittleEndian(w.data(), 4)) {
        stats.corruption = "bad data checksum" + at + std::to_string(record_offset);
        break;
      }
      w.Consume(kFooter);
      ++stats.oversized;
      ++records;
      continue;
    }
    const size_t whole = kHeader + static_cast<size_t>(length) + kFooter;
    HPOD_RETURN_IF_ERROR(w.Fill(whole));
    if (w.size() < whole) break;  // torn (or the budget)
    const std::string_view event(w.data() + kHeader, length);
    if (MaskCrc32c(Crc32c(event)) != LittleEndian(w.data() + kHeader + length, 4)) {
      if (!synced) {
        w.Consume(1);
        ++stats.resync_skipped;
        continue;
      }
      stats.corruption = "bad data checksum" + at + std::to_string(record_offset);
      break;
    }
    synced = true;
    Event e;
    if (!DecodeEvent(event, &e)) {
      ++stats.undecodable;
    } else {
      if (!stats.first_wall_time) stats.first_wall_time = e.wall_time;
      for (const auto& [tag, value] : e.values) on_scalar(tag, e.step, e.wall_time, value);
    }
    w.Consume(whole);
    ++records;
  }
  return stats;
}

ByteSource FdSource(int fd) {
  return [fd](char* buf, size_t n) -> StatusOr<size_t> {
    while (true) {
      const ssize_t got = ::read(fd, buf, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return ErrnoStatus(errno, "reading an event file");
    }
  };
}

DecodedEventFile DecodeEventFile(std::string_view data, size_t chunk_bytes) {
  DecodedEventFile out;
  size_t pos = 0;
  ByteSource source = [&](char* buf, size_t n) -> StatusOr<size_t> {
    const size_t take = std::min(n, data.size() - pos);
    std::memcpy(buf, data.data() + pos, take);
    pos += take;
    return take;
  };
  EventStreamOptions o;
  o.max_bytes = static_cast<int64_t>(data.size());  // no record is ever longer
  o.chunk_bytes = chunk_bytes;
  o.max_record_bytes = std::numeric_limits<uint64_t>::max();
  auto stats = DecodeEventStream(source, o,
                                 [&](std::string_view tag, int64_t step, double wall, float value) {
                                   out.scalars.push_back({std::string(tag), step, wall, value});
                                 });
  if (stats.ok()) {
    out.corruption = std::move(stats->corruption);
    out.undecodable = stats->undecodable;
    out.first_wall_time = stats->first_wall_time;
  }
  return out;
}

}  // namespace hpod::agent
