#pragma once

// TensorBoard event files, decoded as a stream in bounded chunks (training_metrics.h
// reads runs with it; a run's files can be gigabytes, and only a bounded part of
// them is ever held in memory).
//
// An event file is a sequence of TFRecords (src/train/trainer/tfevents.h writes
// them): uint64 length | uint32 masked crc32c(length) | Event | uint32 masked
// crc32c(Event), little-endian; both checksums are verified. Of an Event only
// wall_time (1, double), step (2, int64) and summary (5) → value (1, repeated) →
// {tag (1), simple_value (2, float)} are read; other fields are skipped by wire
// type, and values without simple_value (histograms, images, tensors) are not
// scalars. A file ends in a torn record while its writer is running (the normal
// case during training): decoding stops there without a word. A record whose
// checksum is wrong stops decoding, with `corruption` set.
//
// Thread contract: free functions; safe from any thread (the source and sink are
// called on the caller's thread only).

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::agent {

struct EventStreamOptions {
  // Bytes taken from the source in all; decoding stops there (`budget_reached`).
  int64_t max_bytes = std::numeric_limits<int64_t>::max();
  // Bytes asked of the source at a time: memory held is about this plus one record.
  size_t chunk_bytes = 64 * 1024;
  // A record longer than this is checksummed in chunks but not decoded (scalar
  // Events are tens of bytes; an image or a tensor can be megabytes).
  uint64_t max_record_bytes = uint64_t{1} << 20;
  // The source starts inside a file, not at a record (the newest part of a run
  // larger than the read budget): bytes are skipped until a record whose two
  // checksums hold, the TFRecord way to resynchronise.
  bool resync = false;
  // Decoding stops after this many records (0: no limit); 1 reads a file's first
  // record, the file_version a writer starts with, for its creation time.
  int64_t max_records = 0;
  // Where the source starts in the file, for the offsets in `corruption`.
  int64_t start_offset = 0;
};

struct EventStreamStats {
  // Set when a record failed its checksum: what and at which offset (decoding
  // stopped there). A torn last record is not corruption.
  std::string corruption;
  // Records whose checksums held but whose Event could not be decoded (skipped).
  int64_t undecodable = 0;
  // Records over max_record_bytes (checksummed, skipped).
  int64_t oversized = 0;
  // The wall time of the first decoded record; none when there is none.
  std::optional<double> first_wall_time;
  int64_t bytes_read = 0;
  // With `resync`: bytes skipped before the first whole record.
  int64_t resync_skipped = 0;
  // Decoding stopped at max_bytes with a record still incomplete.
  bool budget_reached = false;
};

// Puts up to `n` bytes into `buf`: how many, 0 at the end, or the read's error.
using ByteSource = std::function<StatusOr<size_t>(char* buf, size_t n)>;
// One scalar; `tag` is valid only during the call.
using ScalarSink =
    std::function<void(std::string_view tag, int64_t step, double wall_time, float value)>;

// Decodes the records of `source` in order, calling `on_scalar` for each scalar.
// The source's error, if reading failed (what was delivered before it stands).
StatusOr<EventStreamStats> DecodeEventStream(const ByteSource& source,
                                             const EventStreamOptions& options,
                                             const ScalarSink& on_scalar);

// A source reading the file `fd` from its current offset (read(2), EINTR retried).
ByteSource FdSource(int fd);

// ---- whole buffers, for tests ----

// One scalar of one event.
struct EventScalar {
  std::string tag;
  int64_t step = 0;
  double wall_time = 0;
  float value = 0;
};

struct DecodedEventFile {
  std::vector<EventScalar> scalars;  // in file order
  std::string corruption;            // as EventStreamStats
  int64_t undecodable = 0;
  std::optional<double> first_wall_time;
};

// Decodes the records of one event file's bytes (DecodeEventStream over them,
// `chunk_bytes` at a time).
DecodedEventFile DecodeEventFile(std::string_view data, size_t chunk_bytes = 64 * 1024);

}  // namespace hpod::agent
