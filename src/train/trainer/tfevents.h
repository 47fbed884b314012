#pragma once

// TensorBoard event files (`events.out.tfevents.*`) with scalar summaries,
// written without a protobuf runtime.
//
// A file is a sequence of TFRecords (tensorflow/core/lib/io/record_writer.cc),
// all little-endian:
//   uint64 length | uint32 masked_crc32c(length bytes) | data | uint32 masked_crc32c(data)
// where data is a serialized tensorboard `Event`. Only these fields are written:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// TensorBoard turns simple_value into a scalar (data_compat.py::migrate_value).
// The first record is Event{wall_time, file_version = "brain.Event:2"}.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "hpod/base/clock.h"
#include "hpod/base/status.h"

namespace hpod::train {

// Serialized Event{wall_time, file_version}.
std::string EncodeFileVersionEvent(double wall_time_s, std::string_view file_version);
// Serialized Event{wall_time, step, summary{value: [{tag, simple_value}...]}}. The
// step is written even when 0 (valid proto3; parsers read it as the default).
std::string EncodeScalarsEvent(double wall_time_s, int64_t step,
                               std::span<const std::pair<std::string, float>> values);
// One TFRecord around `data` (length, masked CRCs).
std::string FrameRecord(std::string_view data);

// Appends scalar summaries to one new event file in a log directory.
//
// Records go to the file with one write(2) each, so a running TensorBoard sees
// them at once and a crash loses at most the record being written (TensorBoard
// stops at a truncated last record and picks it up when it completes). Flush()
// adds fdatasync for durability.
//
// Thread contract: safe for concurrent use; an internal mutex keeps records whole
// and in call order (the loop and a checkpoint thread may both log).
class EventWriter {
 public:
  // Creates `logdir` (and parents) if needed and a new file
  //   <logdir>/events.out.tfevents.<10-digit unix secs>.<hostname>.<pid>.<n>
  // (TF's name plus tensorboard's ".<pid>.<uid>" suffix; n counts the writers of
  // this process), then writes the file_version record. The clock gives the file
  // name's seconds and that record's wall_time.
  static StatusOr<std::unique_ptr<EventWriter>> Create(const std::string& logdir,
                                                       const Clock& clock = RealClock::Get());
  ~EventWriter();  // closes the file (no fsync)
  EventWriter(const EventWriter&) = delete;
  EventWriter& operator=(const EventWriter&) = delete;

  // One Event with one Summary.Value. `tag` must be non-empty UTF-8
  // (InvalidArgument otherwise; protobuf parsers reject bad UTF-8 strings).
  Status AddScalar(std::string_view tag, int64_t step, float value, double wall_time_s);
  // One Event holding all `tags` (e.g. loss, lr, grad norm of one step); same tag rules.
  Status AddScalars(int64_t step, double wall_time_s,
                    std::span<const std::pair<std::string, float>> tags);
  // fdatasync: the records written so far survive a machine crash.
  Status Flush();

  const std::string& path() const { return path_; }

 private:
  EventWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  Status WriteRecord(std::string_view data);

  std::mutex mu_;
  const int fd_;  // owned
  const std::string path_;
  // Bytes of whole records in the file. Invariant: the file holds exactly the
  // records written successfully (a failed write is truncated away).
  off_t size_ = 0;  // guarded by mu_
};

}  // namespace hpod::train
