#include "hpod/agent/host_stats.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include <charconv>
#include <limits>
#include <map>
#include <utility>

#include "hpod/base/file_util.h"
#include "hpod/base/thread_annotations.h"

namespace hpod::agent {

namespace proto = api::agentproto;

namespace {

// Splits on runs of spaces and tabs.
std::vector<std::string_view> Fields(std::string_view line) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

bool ParseUint(std::string_view s, uint64_t* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    out.push_back(text.substr(0, nl));
    if (nl == std::string_view::npos) break;
    text.remove_prefix(nl + 1);
  }
  return out;
}

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      bool octal = true;
      int v = 0;
      for (size_t k = 1; k <= 3; ++k) {
        const char c = s[i + k];
        octal = octal && c >= '0' && c <= '7';
        v = v * 8 + (c - '0');
      }
      if (octal) {
        out += static_cast<char>(v);
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

}  // namespace

StatusOr<proto::HostCpuSeconds> ParseProcStat(std::string_view text, double ticks_per_second) {
  if (ticks_per_second <= 0) return InvalidArgumentError("/proc/stat: no clock tick rate");
  for (std::string_view line : Lines(text)) {
    std::vector<std::string_view> f = Fields(line);
    if (f.empty() || f[0] != "cpu") continue;
    proto::HostCpuSeconds c;
    double* modes[] = {&c.user,   &c.nice, &c.system,  &c.idle,
                       &c.iowait, &c.irq,  &c.softirq, &c.steal};
    for (size_t i = 0; i < std::size(modes) && i + 1 < f.size(); ++i) {
      uint64_t ticks = 0;
      if (!ParseUint(f[i + 1], &ticks)) {
        return InvalidArgumentError("/proc/stat: cpu field " + std::to_string(i + 1) + " '" +
                                    std::string(f[i + 1]) + "' is not a number");
      }
      *modes[i] = static_cast<double>(ticks) / ticks_per_second;
    }
    return c;
  }
  return InvalidArgumentError("/proc/stat: no aggregate 'cpu' line");
}

StatusOr<MemInfo> ParseMeminfo(std::string_view text) {
  std::optional<int64_t> total, available;
  for (std::string_view line : Lines(text)) {
    size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view key = line.substr(0, colon);
    std::optional<int64_t>* out = key == "MemTotal"       ? &total
                                  : key == "MemAvailable" ? &available
                                                          : nullptr;
    if (out == nullptr) continue;
    std::vector<std::string_view> f = Fields(line.substr(colon + 1));
    uint64_t v = 0;
    if (f.empty() || !ParseUint(f[0], &v) || (f.size() > 1 && f[1] != "kB")) {
      return InvalidArgumentError("/proc/meminfo: cannot read '" + std::string(line) + "'");
    }
    *out = static_cast<int64_t>(f.size() > 1 ? v * 1024 : v);
  }
  if (!total || !available) {
    return InvalidArgumentError(std::string("/proc/meminfo: no ") +
                                (!total ? "MemTotal" : "MemAvailable"));
  }
  return MemInfo{*total, *available};
}

int64_t StatvfsBytes(uint64_t blocks, uint64_t fragment_size) {
  constexpr auto kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (fragment_size != 0 && blocks > kMax / fragment_size) return static_cast<int64_t>(kMax);
  return static_cast<int64_t>(blocks * fragment_size);
}

bool IsMountPoint(std::string_view mountinfo, std::string_view path) {
  for (std::string_view line : Lines(mountinfo)) {
    std::vector<std::string_view> f = Fields(line);
    if (f.size() > 4 && Unescape(f[4]) == path) return true;
  }
  return false;
}

// The state the filesystem thread shares with the sampler; the thread holds a
// reference of its own, so a thread detached by Stop never touches a destroyed
// sampler.
struct HostSampler::Shared {
  HostSamplerOptions options;
  const Clock* clock = nullptr;

  struct Answer {
    proto::HostFilesystem fs;
    std::chrono::steady_clock::time_point at;
  };
  Mutex mu;
  std::condition_variable cv;
  bool stopping GUARDED_BY(mu) = false;
  bool busy GUARDED_BY(mu) = false;                     // a statvfs is running (it may be stuck)
  std::map<std::string, Answer> latest GUARDED_BY(mu);  // by mount point
};

HostSampler::HostSampler(HostSamplerOptions options, const Clock& clock)
    : clock_(clock),
      shared_(std::make_shared<Shared>()),
      ticks_per_second_(static_cast<double>(::sysconf(_SC_CLK_TCK))) {
  shared_->options = std::move(options);
  shared_->clock = &clock_;
}

HostSampler::~HostSampler() { Stop(); }

void HostSampler::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread(&HostSampler::Loop, shared_);
}

void HostSampler::Stop() {
  bool stuck;
  {
    MutexLock lock(shared_->mu);
    shared_->stopping = true;
    stuck = shared_->busy;
  }
  shared_->cv.notify_all();
  if (!thread_.joinable()) return;
  // A thread that is not inside statvfs now sees `stopping` before its next one.
  if (stuck) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

bool HostSampler::Pass(Shared& s) {
  std::vector<std::string> paths = s.options.filesystems;
  auto mountinfo = ReadFile(s.options.proc_dir + "/self/mountinfo");
  for (const auto& p : s.options.filesystems_if_mounted) {
    if (mountinfo.ok() && IsMountPoint(*mountinfo, p)) paths.push_back(p);
  }
  for (const auto& path : paths) {
    {
      MutexLock lock(s.mu);
      if (s.stopping) return false;
      s.busy = true;
    }
    struct statvfs st {};
    const bool ok = ::statvfs(path.c_str(), &st) == 0;
    MutexLock lock(s.mu);
    s.busy = false;
    // Stopped while blocked: the sampler (and its clock) may be gone.
    if (s.stopping) return false;
    if (!ok) {
      s.latest.erase(path);
      continue;
    }
    proto::HostFilesystem fs{path, StatvfsBytes(st.f_blocks, st.f_frsize),
                             StatvfsBytes(st.f_bavail, st.f_frsize)};
    s.latest[path] = Shared::Answer{std::move(fs), s.clock->SteadyNow()};
  }
  MutexLock lock(s.mu);
  // A filesystem no longer mounted (an unmounted /fsx) is no longer reported.
  for (auto it = s.latest.begin(); it != s.latest.end();) {
    bool wanted = false;
    for (const auto& p : paths) wanted = wanted || p == it->first;
    it = wanted ? std::next(it) : s.latest.erase(it);
  }
  return !s.stopping;
}

void HostSampler::Loop(std::shared_ptr<Shared> s) {
  while (Pass(*s)) {
    MutexLock lock(s->mu);
    if (lock.WaitFor(s->cv, s->options.interval, [&]() REQUIRES(s->mu) { return s->stopping; })) {
      return;
    }
  }
}

void HostSampler::SampleFilesystemsOnce() { Pass(*shared_); }

std::optional<proto::HostStats> HostSampler::Sample() const {
  const std::string& proc = shared_->options.proc_dir;
  auto stat = ReadFile(proc + "/stat");
  auto meminfo = ReadFile(proc + "/meminfo");
  if (!stat.ok() || !meminfo.ok()) return std::nullopt;
  auto cpu = ParseProcStat(*stat, ticks_per_second_);
  auto mem = ParseMeminfo(*meminfo);
  if (!cpu.ok() || !mem.ok()) return std::nullopt;
  proto::HostStats h;
  h.cpu_seconds = *cpu;
  h.memory_total_bytes = mem->total_bytes;
  h.memory_available_bytes = mem->available_bytes;
  const auto max_age = shared_->options.interval * shared_->options.stale_intervals;
  MutexLock lock(shared_->mu);
  const auto now = clock_.SteadyNow();
  for (const auto& [path, answer] : shared_->latest) {
    if (now - answer.at <= max_age) h.filesystems.push_back(answer.fs);
  }
  return h;
}

}  // namespace hpod::agent
