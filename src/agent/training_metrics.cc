#include "hpod/agent/training_metrics.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "hpod/agent/confined_open.h"
#include "hpod/agent/event_file.h"
#include "hpod/base/file_util.h"

namespace hpod::agent {
namespace {

namespace proto = api::agentproto;
using Json = nlohmann::json;

constexpr std::string_view kEventPrefix = "events.out.tfevents.";
constexpr std::string_view kTensorBoard = "tensorboard";
constexpr std::string_view kJsonl = "jsonl";
constexpr size_t kChunkBytes = 64 * 1024;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}
bool IsEventFileName(std::string_view name) { return name.rfind(kEventPrefix, 0) == 0; }

double MtimeSeconds(const struct stat& st) {
  return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) * 1e-9;
}

// "512 bytes", "64 MiB" (rounded down), for warnings.
std::string Bytes(int64_t n) {
  return n < (int64_t{1} << 20) ? std::to_string(n) + " bytes" : std::to_string(n >> 20) + " MiB";
}

// `path` with "/" between, without doubling it after a root of "/".
std::string Join(const std::string& dir, const std::string& name) {
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

// Up to `max` bytes of `fd` from `offset`.
StatusOr<std::string> ReadAt(int fd, int64_t offset, size_t max) {
  std::string data(max, '\0');
  size_t got = 0;
  while (got < max) {
    const ssize_t n = ::pread(fd, data.data() + got, max - got, offset + static_cast<int64_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "reading");
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  data.resize(got);
  return data;
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

// The first line of the file `name` in `dir_fd` as an object with a numeric
// "step"? A metrics line is short, so 4 KiB are read first (a data set of *.jsonl
// shards under /fsx costs a small read per shard), then up to max_line_bytes.
bool LooksLikeMetricsJsonl(int dir_fd, const std::string& name, size_t max_line_bytes) {
  constexpr size_t kProbe = 4096;
  auto file = OpenRegularAt(dir_fd, name);
  if (!file.ok()) return false;
  auto head = ReadAt(file->fd.get(), 0, kProbe);
  if (head.ok() && head->find('\n') == std::string::npos && head->size() == kProbe) {
    head = ReadAt(file->fd.get(), 0, max_line_bytes);
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

// The series of a run as it is read: the first `max_series` tags met; values of
// any other tag are dropped at once, and the names of up to kMaxDropped of those
// tags are kept for the warning.
class SeriesSet {
 public:
  explicit SeriesSet(size_t max_series) : max_series_(max_series) {}

  void Add(std::string_view tag, int64_t step, double wall_time, double value) {
    auto it = series_.find(tag);
    if (it == series_.end()) {
      if (series_.size() >= max_series_) {
        if (dropped_.count(tag) == 0) {
          if (dropped_.size() < kMaxDropped) {
            dropped_.emplace(tag);
          } else {
            more_dropped_ = true;
          }
        }
        return;
      }
      it = series_.emplace(std::string(tag), SeriesBuilder{}).first;
    }
    it->second.Add(step, wall_time, value);
  }

  std::map<std::string, SeriesBuilder, std::less<>>& series() { return series_; }

  // "300 tags; the first 256 read are answered"; empty when no tag was dropped.
  std::string DroppedWarning() const {
    if (dropped_.empty()) return "";
    const std::string total = std::to_string(series_.size() + dropped_.size());
    return (more_dropped_ ? "more than " + total : total) + " tags; the first " +
           std::to_string(max_series_) + " read are answered";
  }

 private:
  static constexpr size_t kMaxDropped = 4096;
  const size_t max_series_;
  std::map<std::string, SeriesBuilder, std::less<>> series_;
  std::set<std::string, std::less<>> dropped_;
  bool more_dropped_ = false;
};

// ---- TensorBoard ----

// The creation time in an event file's name ("events.out.tfevents.<secs>.host…").
int64_t NameSeconds(const std::string& name) {
  return std::strtoll(name.c_str() + kEventPrefix.size(), nullptr, 10);
}

struct EventFile {
  std::string name;
  int64_t size = 0;
  double created = 0;  // the wall time of its first record, else its name's seconds
};

// The event files of the directory `dir_fd` in the order they were written,
// with their sizes; at most max_event_files (the newest).
StatusOr<std::vector<EventFile>> ListEventFiles(const TrainingMetricsOptions& o, int dir_fd,
                                                const std::string& dir,
                                                std::vector<std::string>* warnings) {
  bool truncated = false;
  HPOD_ASSIGN_OR_RETURN(std::vector<DirEntry> entries,
                        ListDirAt(dir_fd, o.max_entries, &truncated));
  if (truncated) {
    warnings->push_back("looked at only the first " + std::to_string(o.max_entries) +
                        " entries of " + dir);
  }
  std::vector<EventFile> files;
  for (const DirEntry& e : entries) {
    if (IsEventFileName(e.name) && S_ISREG(e.st.st_mode)) files.push_back({e.name});
  }
  if (files.empty()) {
    return InvalidArgumentError(dir + " holds no TensorBoard event files (events.out.tfevents.*)");
  }
  std::sort(files.begin(), files.end(), [](const EventFile& a, const EventFile& b) {
    return std::pair(NameSeconds(a.name), a.name) < std::pair(NameSeconds(b.name), b.name);
  });
  if (files.size() > o.max_event_files) {
    warnings->push_back(std::to_string(files.size()) + " event files; the newest " +
                        std::to_string(o.max_event_files) + " (by name) are read");
    files.erase(files.begin(), files.end() - static_cast<ptrdiff_t>(o.max_event_files));
  }
  // The first record (file_version, written at creation) orders two files
  // created in the same second, which their names cannot (the pid follows the
  // seconds). A small read per file.
  EventStreamOptions probe;
  probe.max_records = 1;
  probe.chunk_bytes = 4096;
  probe.max_bytes = 8192;
  probe.max_record_bytes = 4096;
  std::vector<EventFile> opened;
  for (EventFile& f : files) {
    auto file = OpenRegularAt(dir_fd, f.name);
    if (!file.ok()) {
      warnings->push_back(std::string(file.status().message()));
      continue;
    }
    f.size = file->st.st_size;
    f.created = static_cast<double>(NameSeconds(f.name));
    auto first = DecodeEventStream(FdSource(file->fd.get()), probe,
                                   [](std::string_view, int64_t, double, float) {});
    if (first.ok() && first->first_wall_time) f.created = *first->first_wall_time;
    opened.push_back(std::move(f));
  }
  std::stable_sort(opened.begin(), opened.end(),
                   [](const EventFile& a, const EventFile& b) { return a.created < b.created; });
  return opened;
}

Status ReadTensorBoardDir(const TrainingMetricsOptions& o, int dir_fd, const std::string& dir,
                          SeriesSet* series, std::vector<std::string>* warnings) {
  HPOD_ASSIGN_OR_RETURN(std::vector<EventFile> files, ListEventFiles(o, dir_fd, dir, warnings));
  // The newest files within the budget; the oldest of them may be read from its
  // middle (skip bytes first).
  int64_t left = o.max_read_bytes, total = 0, skip = 0;
  size_t first = files.size();
  for (const EventFile& f : files) total += f.size;
  while (first > 0 && left > 0) {
    const EventFile& f = files[--first];
    skip = std::max<int64_t>(0, f.size - left);
    left -= f.size - skip;
  }
  if (first > 0 || skip > 0) {
    std::string what;
    if (first > 0) what = std::to_string(first) + " older files";
    if (skip > 0) {
      what += (what.empty() ? "the first " : " and the first ") + Bytes(skip) + " of " +
              files[first].name;
    }
    warnings->push_back("the run's event files hold " + Bytes(total) + ", more than the " +
                        Bytes(o.max_read_bytes) + " read per query: the newest are read (" + what +
                        " skipped)");
  }
  for (size_t i = first; i < files.size(); ++i) {
    const EventFile& f = files[i];
    auto file = OpenRegularAt(dir_fd, f.name);
    if (!file.ok()) {
      warnings->push_back(std::string(file.status().message()));
      continue;
    }
    EventStreamOptions read;
    read.chunk_bytes = kChunkBytes;
    // Its size when the budget was shared out: what a writer appends meanwhile
    // is the next query's.
    const int64_t from = i == first ? skip : 0;
    read.max_bytes = f.size - from;
    if (from > 0) {
      if (::lseek(file->fd.get(), from, SEEK_SET) < 0) {
        warnings->push_back(std::string(ErrnoStatus(errno, "reading " + f.name).message()));
        continue;
      }
      read.resync = true;
      read.start_offset = from;
    }
    auto stats = DecodeEventStream(
        FdSource(file->fd.get()), read,
        [series](std::string_view tag, int64_t step, double wall_time, float value) {
          series->Add(tag, step, wall_time, static_cast<double>(value));
        });
    if (!stats.ok()) {
      warnings->push_back(f.name + ": " + std::string(stats.status().message()));
      continue;
    }
    if (!stats->corruption.empty()) {
      warnings->push_back(f.name + ": " + stats->corruption + "; the rest of the file was skipped");
    }
    if (stats->undecodable > 0) {
      warnings->push_back(f.name + ": " + std::to_string(stats->undecodable) +
                          " records could not be decoded and were skipped");
    }
  }
  return OkStatus();
}

// ---- JSONL ----

// One line's points; false when it is no metrics line.
bool AddJsonlLine(const TrainingMetricsOptions& o, std::string_view line, SeriesSet* series) {
  if (line.size() > o.max_line_bytes) return false;
  const Json j = Json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  const std::optional<int64_t> step = StepOf(j);
  if (!step) return false;
  double wall_time = 0;
  for (const char* key : {"wall_time", "time"}) {
    if (j.contains(key) && j[key].is_number()) {
      wall_time = j[key].get<double>();
      break;
    }
  }
  for (const auto& [key, value] : j.items()) {
    if (key == "step" || key == "wall_time" || key == "time" || !value.is_number()) continue;
    series->Add(key, *step, wall_time, value.get<double>());
  }
  return true;
}

// Reads the lines of `file` in chunks (never more than one line and one chunk
// held), its last max_read_bytes when it is larger.
Status ReadJsonl(const TrainingMetricsOptions& o, const OpenedPath& file, SeriesSet* series,
                 std::vector<std::string>* warnings) {
  const int fd = file.fd.get();
  const int64_t size = file.st.st_size;
  const int64_t start = std::max<int64_t>(0, size - o.max_read_bytes);
  if (start > 0) {
    if (::lseek(fd, start, SEEK_SET) < 0) return ErrnoStatus(errno, "reading " + file.name);
    warnings->push_back("the file holds " + Bytes(size) + ", more than the " +
                        Bytes(o.max_read_bytes) + " read per query: its last " +
                        Bytes(o.max_read_bytes) + " are read, the older lines skipped");
  }
  int64_t malformed = 0, line_no = 0, first_bad = 0, read_total = 0;
  auto bad = [&] {
    if (++malformed == 1) first_bad = line_no;
  };
  std::string carry;          // the line being assembled
  bool skipping = start > 0;  // the first bytes read are the end of a skipped line
  bool overlong = false;      // the current line passed max_line_bytes: dropped to its end
  std::vector<char> buf(kChunkBytes);
  bool at_end = false;
  while (!at_end && read_total < o.max_read_bytes) {
    const size_t want = static_cast<size_t>(
        std::min<int64_t>(static_cast<int64_t>(buf.size()), o.max_read_bytes - read_total));
    const ssize_t n = ::read(fd, buf.data(), want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "reading " + file.name);
    read_total += n;
    // At the file's size when looked at: lines appended since are the next read's.
    at_end = n == 0 || start + read_total >= size;
    std::string_view chunk(buf.data(), static_cast<size_t>(n));
    while (!chunk.empty()) {
      const size_t nl = chunk.find('\n');
      const std::string_view piece = chunk.substr(0, std::min(nl, chunk.size()));
      if (!skipping && !overlong) {
        if (carry.size() + piece.size() > o.max_line_bytes) {
          overlong = true;
          carry.clear();
        } else {
          carry.append(piece);
        }
      }
      if (nl == std::string_view::npos) break;
      chunk.remove_prefix(nl + 1);
      if (std::exchange(skipping, false)) continue;
      ++line_no;
      if (std::exchange(overlong, false)) {
        bad();
      } else if (!carry.empty() && !AddJsonlLine(o, carry, series)) {
        bad();
      }
      carry.clear();
    }
  }
  // A last line without its newline is being written: taken only when it is
  // already whole, else left for the next read.
  if (at_end && !skipping && !overlong && !carry.empty()) AddJsonlLine(o, carry, series);
  if (malformed > 0) {
    warnings->push_back(std::to_string(malformed) + " malformed lines skipped (the first is line " +
                        std::to_string(first_bad) + (start > 0 ? " of the part read)" : ")"));
  }
  return OkStatus();
}

}  // namespace

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
  auto root = OpenRoot(o.root);
  if (!root.ok()) return FailedPreconditionError(o.root + " is not a directory on this node");
  RunList list;
  int64_t budget = o.max_entries;
  // Directories by their path relative to root, each opened beneath root's fd
  // without following symlinks (one swapped in after the listing is refused).
  std::deque<std::pair<std::string, int>> dirs = {{"", 0}};
  while (!dirs.empty() && budget > 0) {
    auto [rel, depth] = dirs.front();
    dirs.pop_front();
    const std::string dir = rel.empty() ? o.root : Join(o.root, rel);
    ScopedFd opened;
    if (!rel.empty()) {
      auto d = OpenBeneath(root->get(), o.root, rel, Symlinks::kNever);
      if (!d.ok()) {
        list.warnings.push_back(std::string(d.status().message()));
        continue;
      }
      if (!S_ISDIR(d->st.st_mode)) continue;  // replaced since it was listed
      opened = std::move(d->fd);
    }
    const int dir_fd = rel.empty() ? root->get() : opened.get();
    auto entries = ListDirAt(dir_fd, std::numeric_limits<int64_t>::max(), nullptr, &budget);
    if (!entries.ok()) {
      list.warnings.push_back(dir + ": " + std::string(entries.status().message()));
      continue;
    }
    proto::TrainingRun events{dir, std::string(kTensorBoard), 0, 0};
    bool has_events = false;
    for (const DirEntry& e : *entries) {
      if (S_ISDIR(e.st.st_mode)) {
        if (depth < o.max_depth)
          dirs.emplace_back(rel.empty() ? e.name : rel + "/" + e.name, depth + 1);
      } else if (!S_ISREG(e.st.st_mode)) {
        continue;  // symlinks are not followed; devices and sockets are no runs
      } else if (IsEventFileName(e.name)) {
        has_events = true;
        events.last_modified = std::max(events.last_modified, MtimeSeconds(e.st));
        events.size_bytes += e.st.st_size;
      } else if (EndsWith(e.name, ".jsonl") &&
                 LooksLikeMetricsJsonl(dir_fd, e.name, o.max_line_bytes)) {
        list.runs.push_back(
            {Join(dir, e.name), std::string(kJsonl), MtimeSeconds(e.st), e.st.st_size});
      }
    }
    if (has_events) list.runs.push_back(std::move(events));
  }
  // ListDirAt leaves the budget below 0 when it stopped in a directory.
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
  if (path.empty()) return InvalidArgumentError("the run's path is empty");
  HPOD_ASSIGN_OR_RETURN(ScopedFd root, OpenRoot(o.root));
  // By name first, so that whether something exists outside root is never told.
  const std::optional<std::string> rel = RelativeUnder(o.root, path);
  if (!rel) return InvalidArgumentError("path " + path + " is outside " + o.root);
  auto run = OpenBeneath(root.get(), o.root, *rel, Symlinks::kFollowInside);
  if (!run.ok()) {
    if (run.status().code() == StatusCode::kNotFound) return NotFoundError("no run at " + path);
    return run.status();
  }
  RunMetrics out;
  SeriesSet series(o.max_series);
  if (S_ISDIR(run->st.st_mode)) {
    const std::string dir = *rel == "." ? o.root : Join(o.root, *rel);
    HPOD_RETURN_IF_ERROR(ReadTensorBoardDir(o, run->fd.get(), dir, &series, &out.warnings));
  } else if (S_ISREG(run->st.st_mode) && EndsWith(run->name, ".jsonl")) {
    HPOD_RETURN_IF_ERROR(ReadJsonl(o, *run, &series, &out.warnings));
  } else {
    return InvalidArgumentError(path + " is neither a TensorBoard log directory nor a .jsonl file");
  }
  if (std::string dropped = series.DroppedWarning(); !dropped.empty()) {
    out.warnings.push_back(std::move(dropped));
  }
  // Fewer points per series when all of them would not fit in one answer.
  const auto answered = static_cast<int64_t>(series.series().size());
  int64_t per_series = max_points;
  if (answered > 0 && per_series * answered > o.max_total_points) {
    per_series = std::max<int64_t>(2, o.max_total_points / answered);
  }
  bool thinned = false;
  for (auto& [tag, builder] : series.series()) {
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
