#include "hpod/agent/training_metrics.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "hpod/base/crc32c.h"
#include "hpod/base/file_util.h"

namespace hpod::agent {
namespace {

namespace proto = api::agentproto;
using Json = nlohmann::json;

constexpr std::string_view kEventPrefix = "events.out.tfevents.";
constexpr std::string_view kTensorBoard = "tensorboard";
constexpr std::string_view kJsonl = "jsonl";

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool IsEventFileName(std::string_view name) { return name.rfind(kEventPrefix, 0) == 0; }

double MtimeSeconds(const struct stat& st) {
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
}

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

uint64_t LittleEndian(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = (v << 8) | static_cast<uint8_t>(bytes[i]);
  return v;
}

bool ReadFixed(std::string_view& in, size_t n, uint64_t* v) {
  if (in.size() < n) return false;
  *v = LittleEndian(in.substr(0, n));
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
bool DecodeValue(std::string_view in, std::string* tag, float* value, bool* has_simple) {
  *has_simple = false;
  uint32_t field, wire;
  while (!in.empty()) {
    if (!ReadKey(in, &field, &wire)) return false;
    if (field == 1 && wire == kLengthDelimited) {
      std::string_view t;
      if (!ReadBytes(in, &t)) return false;
      tag->assign(t);
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

// Event: wall_time = 1, step = 2, summary = 5 (Summary.value = 1, repeated).
bool DecodeEvent(std::string_view in, std::vector<EventScalar>* out, double* event_wall_time) {
  double& wall_time = *event_wall_time;
  wall_time = 0;
  int64_t step = 0;
  std::vector<std::pair<std::string, float>> values;
  uint32_t field, wire;
  while (!in.empty()) {
    if (!ReadKey(in, &field, &wire)) return false;
    if (field == 1 && wire == kFixed64) {
      uint64_t bits;
      if (!ReadFixed(in, 8, &bits)) return false;
      std::memcpy(&wall_time, &bits, sizeof(wall_time));
    } else if (field == 2 && wire == kVarint) {
      uint64_t v;
      if (!ReadVarint(in, &v)) return false;
      step = static_cast<int64_t>(v);  // int64: two's complement
    } else if (field == 5 && wire == kLengthDelimited) {
      std::string_view summary;
      if (!ReadBytes(in, &summary)) return false;
      while (!summary.empty()) {
        if (!ReadKey(summary, &field, &wire)) return false;
        if (field != 1 || wire != kLengthDelimited) {
          if (!SkipField(summary, wire)) return false;
          continue;
        }
        std::string_view v;
        if (!ReadBytes(summary, &v)) return false;
        std::string tag;
        float value = 0;
        bool scalar;
        if (!DecodeValue(v, &tag, &value, &scalar)) return false;
        if (scalar && !tag.empty()) values.emplace_back(std::move(tag), value);
      }
    } else if (!SkipField(in, wire)) {
      return false;
    }
  }
  for (auto& [tag, value] : values) out->push_back({std::move(tag), step, wall_time, value});
  return true;
}

// ---- files ----

// At most `max_bytes` of the file at the start (O_NOFOLLOW: a symlink swapped in
// after the checks is not followed out of root).
StatusOr<std::string> ReadPrefix(const std::string& path, int64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return ErrnoStatus(errno, "opening " + path);
  std::string data;
  char buf[64 * 1024];
  while (static_cast<int64_t>(data.size()) < max_bytes) {
    const size_t want =
        static_cast<size_t>(std::min<int64_t>(sizeof(buf), max_bytes - data.size()));
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return ErrnoStatus(err, "reading " + path);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return data;
}

struct DirEntry {
  std::string name;
  struct stat st;
};

// The entries of `dir` with their lstat (an entry that vanished meanwhile is
// left out). `budget`, when set, is decremented per entry; listing stops at 0.
StatusOr<std::vector<DirEntry>> ListDir(const std::string& dir, int64_t* budget) {
  std::unique_ptr<DIR, int (*)(DIR*)> d(::opendir(dir.c_str()), &::closedir);
  if (!d) return ErrnoStatus(errno, "listing " + dir);
  std::vector<DirEntry> out;
  while (struct dirent* e = ::readdir(d.get())) {
    const std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    if (budget != nullptr && (*budget)-- <= 0) break;
    DirEntry entry{std::string(name), {}};
    if (::fstatat(::dirfd(d.get()), e->d_name, &entry.st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    out.push_back(std::move(entry));
  }
  return out;
}

// `path` with "/" between, without doubling it after a root of "/".
std::string Join(const std::string& dir, const std::string& name) {
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// A JSONL line's integer "step", if it is an object with one.
std::optional<int64_t> StepOf(const Json& line) {
  if (!line.is_object()) return std::nullopt;
  auto it = line.find("step");
  if (it == line.end() || !it->is_number()) return std::nullopt;
  if (it->is_number_integer()) return it->get<int64_t>();
  const double d = it->get<double>();
  if (std::floor(d) != d || std::abs(d) > 9e15) return std::nullopt;
  return static_cast<int64_t>(d);
}

// The first line of a JSONL file as an object with a numeric "step"? A metrics
// line is short, so 4 KiB are read first (a data set of *.jsonl shards under
// /fsx costs a small read per shard), then up to max_line_bytes.
bool LooksLikeMetricsJsonl(const std::string& path, size_t max_line_bytes) {
  constexpr int64_t kProbe = 4096;
  auto head = ReadPrefix(path, kProbe);
  if (head.ok() && head->find('\n') == std::string::npos && head->size() == kProbe) {
    head = ReadPrefix(path, static_cast<int64_t>(max_line_bytes));
  }
  if (!head.ok()) return false;
  const size_t nl = head->find('\n');
  if (nl == std::string::npos) return false;  // empty, being written, or a huge line
  return StepOf(Json::parse(head->substr(0, nl), nullptr, /*allow_exceptions=*/false)).has_value();
}

// ---- series ----

// Points of one tag as they are read, replacing re-run steps (see the header).
struct SeriesBuilder {
  std::vector<proto::TrainingPoint> points;
  int64_t non_finite = 0;

  void Add(int64_t step, double wall_time, double value) {
    if (!std::isfinite(value)) {
      ++non_finite;
      return;
    }
    if (!points.empty() && step <= points.back().step) {
      auto from =
          std::lower_bound(points.begin(), points.end(), step,
                           [](const proto::TrainingPoint& p, int64_t s) { return p.step < s; });
      points.erase(from, points.end());
    }
    points.push_back({step, wall_time, value});
  }
};

using SeriesMap = std::map<std::string, SeriesBuilder>;

// Resolves `path` inside options.root; kInvalidArgument when it is not.
StatusOr<std::string> ResolveInsideRoot(const TrainingMetricsOptions& o, const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty()) return InvalidArgumentError("the run's path is empty");
  char real_root[PATH_MAX];
  if (::realpath(o.root.c_str(), real_root) == nullptr) {
    return FailedPreconditionError(o.root +
                                   " is not available on this node: " + std::strerror(errno));
  }
  const fs::path root = fs::path(o.root).lexically_normal();
  const fs::path given = fs::path(path).is_absolute() ? fs::path(path) : root / path;
  const std::string outside = "path " + path + " is outside " + o.root;
  // By name first, so that whether something exists outside root is never told.
  const fs::path normal = given.lexically_normal();
  const fs::path rel = normal.lexically_relative(root);
  if (rel.empty() || *rel.begin() == "..") return InvalidArgumentError(outside);
  char real[PATH_MAX];
  if (::realpath(normal.c_str(), real) == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) return NotFoundError("no run at " + path);
    return ErrnoStatus(errno, "resolving " + path);
  }
  const std::string real_root_s = real_root, real_s = real;
  const bool inside =
      real_s == real_root_s || real_root_s == "/" || real_s.rfind(real_root_s + "/", 0) == 0;
  if (!inside) return InvalidArgumentError(outside + " (after resolving symlinks)");
  return real_s;
}

// The creation time in an event file's name ("events.out.tfevents.<secs>.host…").
int64_t NameSeconds(const std::string& name) {
  return std::strtoll(name.c_str() + kEventPrefix.size(), nullptr, 10);
}

Status ReadTensorBoardDir(const TrainingMetricsOptions& o, const std::string& dir,
                          SeriesMap* series, std::vector<std::string>* warnings) {
  HPOD_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, ListDir(dir, nullptr));
  std::vector<std::string> files;
  for (const DirEntry& e : entries) {
    if (IsEventFileName(e.name) && S_ISREG(e.st.st_mode)) files.push_back(e.name);
  }
  if (files.empty()) {
    return InvalidArgumentError(dir + " holds no TensorBoard event files (events.out.tfevents.*)");
  }
  std::sort(files.begin(), files.end(), [](const std::string& a, const std::string& b) {
    return std::pair(NameSeconds(a), a) < std::pair(NameSeconds(b), b);
  });
  int64_t budget = o.max_read_bytes;
  std::vector<std::pair<std::string, DecodedEventFile>> decoded_files;
  for (const std::string& name : files) {
    if (budget <= 0) {
      warnings->push_back("stopped reading before " + name + ": the run's files exceed " +
                          std::to_string(o.max_read_bytes >> 20) + " MiB");
      break;
    }
    auto data = ReadPrefix(Join(dir, name), budget + 1);
    if (!data.ok()) {
      warnings->push_back(std::string(data.status().message()));
      continue;
    }
    if (static_cast<int64_t>(data->size()) > budget) {
      data->resize(budget);
      warnings->push_back("read only the first " + std::to_string(budget) + " bytes of " + name);
    }
    budget -= static_cast<int64_t>(data->size());
    decoded_files.emplace_back(name, DecodeEventFile(*data));
  }
  // Oldest writer first: the first record's wall time (file_version, written at
  // creation) orders two files created in the same second, which their names
  // cannot (the pid follows the seconds).
  std::stable_sort(decoded_files.begin(), decoded_files.end(), [](const auto& a, const auto& b) {
    return a.second.first_wall_time.value_or(NameSeconds(a.first)) <
           b.second.first_wall_time.value_or(NameSeconds(b.first));
  });
  for (const auto& [name, decoded] : decoded_files) {
    for (const EventScalar& s : decoded.scalars) {
      (*series)[s.tag].Add(s.step, s.wall_time, static_cast<double>(s.value));
    }
    if (!decoded.corruption.empty()) {
      warnings->push_back(name + ": " + decoded.corruption + "; the rest of the file was skipped");
    }
    if (decoded.undecodable > 0) {
      warnings->push_back(name + ": " + std::to_string(decoded.undecodable) +
                          " records could not be decoded and were skipped");
    }
  }
  return OkStatus();
}

Status ReadJsonl(const TrainingMetricsOptions& o, const std::string& path, SeriesMap* series,
                 std::vector<std::string>* warnings) {
  HPOD_ASSIGN_OR_RETURN(std::string data, ReadPrefix(path, o.max_read_bytes + 1));
  if (static_cast<int64_t>(data.size()) > o.max_read_bytes) {
    data.resize(o.max_read_bytes);
    warnings->push_back("read only the first " + std::to_string(o.max_read_bytes) + " bytes");
  }
  int64_t malformed = 0, line_no = 0, first_bad = 0;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t nl = data.find('\n', pos);
    const bool last = nl == std::string::npos;
    std::string_view line(data.data() + pos, (last ? data.size() : nl) - pos);
    pos = last ? data.size() : nl + 1;
    ++line_no;
    if (line.empty()) continue;
    Json j = line.size() > o.max_line_bytes
                 ? Json(Json::value_t::discarded)
                 : Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
    const std::optional<int64_t> step = StepOf(j);
    if (!step) {
      // A line without its newline is being written: the next read has it whole.
      if (last) break;
      if (++malformed == 1) first_bad = line_no;
      continue;
    }
    double wall_time = 0;
    for (const char* key : {"wall_time", "time"}) {
      if (j.contains(key) && j[key].is_number()) {
        wall_time = j[key].get<double>();
        break;
      }
    }
    for (const auto& [key, value] : j.items()) {
      if (key == "step" || key == "wall_time" || key == "time" || !value.is_number()) continue;
      (*series)[key].Add(*step, wall_time, value.get<double>());
    }
  }
  if (malformed > 0) {
    warnings->push_back(std::to_string(malformed) + " malformed lines skipped (the first is line " +
                        std::to_string(first_bad) + ")");
  }
  return OkStatus();
}

}  // namespace

DecodedEventFile DecodeEventFile(std::string_view data) {
  DecodedEventFile out;
  size_t pos = 0;
  while (data.size() - pos >= 12) {
    const std::string_view header = data.substr(pos, 12);
    const uint64_t length = LittleEndian(header.substr(0, 8));
    const auto length_crc = static_cast<uint32_t>(LittleEndian(header.substr(8, 4)));
    if (MaskCrc32c(Crc32c(header.data(), 8)) != length_crc) {
      out.corruption = "bad length checksum in the record at offset " + std::to_string(pos);
      break;
    }
    if (length > data.size() - pos - 12 || data.size() - pos - 12 - length < 4) break;  // torn
    const std::string_view event = data.substr(pos + 12, length);
    const auto data_crc = static_cast<uint32_t>(LittleEndian(data.substr(pos + 12 + length, 4)));
    if (MaskCrc32c(Crc32c(event)) != data_crc) {
      out.corruption = "bad data checksum in the record at offset " + std::to_string(pos);
      break;
    }
    const size_t before = out.scalars.size();
    double wall_time = 0;
    if (!DecodeEvent(event, &out.scalars, &wall_time)) {
      out.scalars.resize(before);
      ++out.undecodable;
    } else if (!out.first_wall_time) {
      out.first_wall_time = wall_time;
    }
    pos += 12 + length + 4;
  }
  return out;
}

void Downsample(std::vector<proto::TrainingPoint>& points, size_t max_points) {
  const size_t n = points.size();
  if (n <= max_points) return;
  if (max_points <= 1) {
    points.erase(points.begin(), points.end() - static_cast<ptrdiff_t>(max_points));
    return;
  }
  // Index i of the kept ones is round(i * (n-1) / (max-1)): strictly increasing
  // (n > max), 0 first and n-1 last.
  std::vector<proto::TrainingPoint> kept;
  kept.reserve(max_points);
  for (size_t i = 0; i < max_points; ++i) {
    const size_t at = (i * (n - 1) + (max_points - 1) / 2) / (max_points - 1);
    kept.push_back(points[at]);
  }
  points = std::move(kept);
}

StatusOr<RunList> ListRuns(const TrainingMetricsOptions& o) {
  struct stat root_st;
  if (::stat(o.root.c_str(), &root_st) != 0 || !S_ISDIR(root_st.st_mode)) {
    return FailedPreconditionError(o.root + " is not a directory on this node");
  }
  RunList list;
  int64_t budget = o.max_entries;
  std::deque<std::pair<std::string, int>> dirs = {{o.root, 0}};
  while (!dirs.empty() && budget > 0) {
    auto [dir, depth] = dirs.front();
    dirs.pop_front();
    auto entries = ListDir(dir, &budget);
    if (!entries.ok()) {
      list.warnings.push_back(std::string(entries.status().message()));
      continue;
    }
    proto::TrainingRun events{dir, std::string(kTensorBoard), 0, 0};
    bool has_events = false;
    for (const DirEntry& e : *entries) {
      const std::string path = Join(dir, e.name);
      if (S_ISDIR(e.st.st_mode)) {
        if (depth < o.max_depth) dirs.emplace_back(path, depth + 1);
      } else if (!S_ISREG(e.st.st_mode)) {
        continue;  // symlinks are not followed; devices and sockets are no runs
      } else if (IsEventFileName(e.name)) {
        has_events = true;
        events.last_modified = std::max(events.last_modified, MtimeSeconds(e.st));
        events.size_bytes += e.st.st_size;
      } else if (EndsWith(e.name, ".jsonl") && LooksLikeMetricsJsonl(path, o.max_line_bytes)) {
        list.runs.push_back({path, std::string(kJsonl), MtimeSeconds(e.st), e.st.st_size});
      }
    }
    if (has_events) list.runs.push_back(std::move(events));
  }
  // ListDir leaves the budget below 0 when it stopped in a directory.
  if (budget < 0 || (budget == 0 && !dirs.empty())) {
    list.warnings.push_back("stopped after " + std::to_string(o.max_entries) + " entries under " +
                            o.root + "; runs further down were not looked for");
  }
  std::sort(list.runs.begin(), list.runs.end(), [](const auto& a, const auto& b) {
    return a.last_modified != b.last_modified ? a.last_modified > b.last_modified : a.path < b.path;
  });
  if (list.runs.size() > o.max_runs) {
    list.warnings.push_back(std::to_string(list.runs.size()) + " runs found; the newest " +
                            std::to_string(o.max_runs) + " are listed");
    list.runs.resize(o.max_runs);
  }
  return list;
}

StatusOr<RunMetrics> ReadRun(const TrainingMetricsOptions& o, const std::string& path,
                             int64_t max_points) {
  if (max_points < 0 || max_points > o.max_points_limit) {
    return InvalidArgumentError("MaxPoints must be 1.." + std::to_string(o.max_points_limit) +
                                " (got " + std::to_string(max_points) + ")");
  }
  if (max_points == 0) max_points = o.default_max_points;
  HPOD_ASSIGN_OR_RETURN(std::string real, ResolveInsideRoot(o, path));
  struct stat st;
  if (::stat(real.c_str(), &st) != 0) return ErrnoStatus(errno, "reading " + path);
  RunMetrics out;
  SeriesMap series;
  if (S_ISDIR(st.st_mode)) {
    HPOD_RETURN_IF_ERROR(ReadTensorBoardDir(o, real, &series, &out.warnings));
  } else if (S_ISREG(st.st_mode) && EndsWith(real, ".jsonl")) {
    HPOD_RETURN_IF_ERROR(ReadJsonl(o, real, &series, &out.warnings));
  } else {
    return InvalidArgumentError(path + " is neither a TensorBoard log directory nor a .jsonl file");
  }
  if (series.size() > o.max_series) {
    out.warnings.push_back(std::to_string(series.size()) + " tags; the first " +
                           std::to_string(o.max_series) + " are answered");
  }
  // Fewer points per series when all of them would not fit in one answer.
  const size_t answered = std::min(series.size(), o.max_series);
  int64_t per_series = max_points;
  if (answered > 0 && per_series * static_cast<int64_t>(answered) > o.max_total_points) {
    per_series = std::max<int64_t>(2, o.max_total_points / static_cast<int64_t>(answered));
  }
  bool thinned = false;
  for (auto& [tag, builder] : series) {
    if (out.series.size() == answered) break;
    if (builder.non_finite > 0) {
      out.warnings.push_back(tag + ": " + std::to_string(builder.non_finite) +
                             " non-finite values left out");
    }
    thinned |= per_series<max_points&& static_cast<int64_t>(builder.points.size())> per_series;
    Downsample(builder.points, static_cast<size_t>(per_series));
    out.series.push_back({tag, std::move(builder.points)});
  }
  if (thinned) {
    out.warnings.push_back("at most " + std::to_string(per_series) + " points per series (" +
                           std::to_string(answered) + " series, " +
                           std::to_string(o.max_total_points) + " points per answer)");
  }
  return out;
}

proto::TrainingResult AnswerTrainingQuery(const TrainingMetricsOptions& options,
                                          const proto::TrainingQuery& query) {
  proto::TrainingResult result;
  result.id = query.id;
  if (query.op == proto::TrainingQuery::kListRuns) {
    auto runs = ListRuns(options);
    if (!runs.ok()) return proto::TrainingResult::Failed(query.id, runs.status());
    result.runs = std::move(runs->runs);
    result.warnings = std::move(runs->warnings);
  } else if (query.op == proto::TrainingQuery::kReadRun) {
    auto run = ReadRun(options, query.path, query.max_points);
    if (!run.ok()) return proto::TrainingResult::Failed(query.id, run.status());
    result.series = std::move(run->series);
    result.warnings = std::move(run->warnings);
  } else {
    return proto::TrainingResult::Failed(query.id,
                                         InvalidArgumentError("unknown op '" + query.op + "'"));
  }
  return result;
}

}  // namespace hpod::agent
