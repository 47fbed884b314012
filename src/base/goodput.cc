#include "hpod/base/goodput.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <limits>
#include <utility>

namespace hpod::goodput {
namespace {

using nlohmann::json;

// Lenient field access: a ledger written by another version may lack a field
// or carry it with another type, and .get<>() would throw.
double Num(const json& j, const char* key, double def) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : def;
}

int64_t Int(const json& j, const char* key, int64_t def) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return def;
  return it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(it->get<double>());
}

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

bool Blank(std::string_view line) {
  return line.find_first_not_of(" \t\r") == std::string_view::npos;
}

struct StepRecord {
  int64_t step;
  double step_s;
};

void Appendf(std::string* out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void Appendf(std::string* out, const char* format, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, format);
  const int n = std::vsnprintf(buf, sizeof(buf), format, ap);
  va_end(ap);
  if (n > 0) out->append(buf, std::min<size_t>(static_cast<size_t>(n), sizeof(buf) - 1));
}

}  // namespace

StatusOr<Summary> Summarize(std::string_view text) {
  Summary s;
  std::vector<std::vector<StepRecord>> steps;  // by attempt
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const bool terminated = nl != std::string_view::npos;
    const std::string_view line = text.substr(pos, terminated ? nl - pos : std::string_view::npos);
    pos = terminated ? nl + 1 : text.size();
    if (Blank(line)) continue;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool event = !j.is_discarded() && j.is_object() && j.contains("event") &&
                       j["event"].is_string() && j.contains("time") && j["time"].is_number();
    if (!event) {
      // Unterminated and unparsable: the writer was cut off mid-line.
      if (terminated || !j.is_discarded()) s.skipped_lines += 1;
      continue;
    }
    const std::string kind = j["event"].get<std::string>();
    const double time = j["time"].get<double>();
    if (kind == "start") {
      Attempt a;
      a.ready_time = time;
      a.process_start = Num(j, "process_start", time);
      a.last_time = time;
      a.resumed_step = Int(j, "resumed_step", 0);
      a.last_step = a.resumed_step;
      a.checkpoint_load_s = Num(j, "checkpoint_load_s", 0);
      a.rendezvous_s = Num(j, "rendezvous_s", 0);
      a.world_size = static_cast<int>(Int(j, "world_size", 0));
      a.restart = static_cast<int>(Int(j, "restart", 0));
      a.attempt = static_cast<int>(Int(j, "attempt", 0));
      a.job_id = Str(j, "job_id");
      s.attempts.push_back(std::move(a));
      steps.emplace_back();
      continue;
    }
    if (s.attempts.empty()) {
      s.skipped_lines += 1;  // no process to charge it to
      continue;
    }
    Attempt& a = s.attempts.back();
    if (kind == "step") {
      if (!j.contains("step") || !j["step"].is_number()) {
        s.skipped_lines += 1;
        continue;
      }
      const int64_t step = Int(j, "step", 0);
      const double step_s = Num(j, "step_s", 0);
      if (a.steps == 0) a.first_step_time = time;
      a.steps += 1;
      a.step_s += step_s;
      a.last_step = std::max(a.last_step, step);
      steps.back().push_back({step, step_s});
    } else if (kind == "checkpoint") {
      a.checkpoints += 1;
      a.checkpoint_save_s += Num(j, "save_s", 0);
    } else if (kind == "end") {
      a.status = Str(j, "status");
      a.last_step = std::max(a.last_step, Int(j, "step", a.last_step));
    }
    // Unknown kinds (a newer writer's) still mark the process as alive.
    a.last_time = std::max(a.last_time, time);
  }
  if (s.attempts.empty()) {
    return NotFoundError(
        "the goodput ledger holds no start event (no training process has started yet" +
        (s.skipped_lines > 0 ? "; " + std::to_string(s.skipped_lines) + " unreadable lines"
                             : std::string()) +
        ")");
  }

  // A step is re-run work when any later attempt resumed from before it: the
  // minimum resumed_step over the attempts after each one decides.
  const size_t n = s.attempts.size();
  std::vector<int64_t> resumed_after(n, std::numeric_limits<int64_t>::max());
  for (size_t i = n - 1; i > 0; --i) {
    resumed_after[i - 1] = std::min(resumed_after[i], s.attempts[i].resumed_step);
  }
  double last_time = 0;
  for (size_t i = 0; i < n; ++i) {
    last_time = std::max(last_time, s.attempts[i].last_time);
    for (const StepRecord& r : steps[i]) {
      if (r.step <= resumed_after[i]) {
        s.useful_step_s += r.step_s;
        s.useful_steps += 1;
      } else {
        s.steps_rerun += 1;
      }
    }
  }
  for (size_t i = 0; i + 1 < n; ++i) {
    const Attempt& a = s.attempts[i];
    const Attempt& b = s.attempts[i + 1];
    Gap g;
    g.lost_s = b.process_start - a.last_time;
    g.restart_s = b.ready_time - b.process_start;
    g.checkpoint_load_s = b.checkpoint_load_s;
    g.rendezvous_s = b.rendezvous_s;
    g.first_step_s = b.steps > 0 ? b.first_step_time - b.process_start : 0;
    g.steps_rerun = std::max<int64_t>(0, a.last_step - b.resumed_step);
    for (const StepRecord& r : steps[i]) {
      if (r.step > b.resumed_step) g.rerun_s += r.step_s;
    }
    s.gaps.push_back(g);
  }
  s.wall_s = std::max(0.0, last_time - s.attempts.front().process_start);
  s.final_step = s.attempts.back().last_step;
  // Clamped: attempts may run on different hosts whose clocks disagree a little.
  s.goodput = s.wall_s > 0 ? std::clamp(s.useful_step_s / s.wall_s, 0.0, 1.0) : 0;
  return s;
}

json ToJson(const Summary& s) {
  json attempts = json::array();
  for (const Attempt& a : s.attempts) {
    attempts.push_back({
        {"job_id", a.job_id},
        {"restart", a.restart},
        {"attempt", a.attempt},
        {"world_size", a.world_size},
        {"status", a.status.empty() ? json(nullptr) : json(a.status)},
        {"process_start", a.process_start},
        {"ready_time", a.ready_time},
        {"first_step_time", a.steps > 0 ? json(a.first_step_time) : json(nullptr)},
        {"last_time", a.last_time},
        {"resumed_step", a.resumed_step},
        {"last_step", a.last_step},
        {"steps", a.steps},
        {"step_s", a.step_s},
        {"checkpoint_load_s", a.checkpoint_load_s},
        {"rendezvous_s", a.rendezvous_s},
        {"checkpoints", a.checkpoints},
        {"checkpoint_save_s", a.checkpoint_save_s},
    });
  }
  json gaps = json::array();
  for (const Gap& g : s.gaps) {
    gaps.push_back({
        {"lost_s", g.lost_s},
        {"restart_s", g.restart_s},
        {"checkpoint_load_s", g.checkpoint_load_s},
        {"rendezvous_s", g.rendezvous_s},
        {"first_step_s", g.first_step_s},
        {"steps_rerun", g.steps_rerun},
        {"rerun_s", g.rerun_s},
    });
  }
  return json{
      {"wall_s", s.wall_s},
      {"useful_step_s", s.useful_step_s},
      {"goodput", s.goodput},
      {"useful_steps", s.useful_steps},
      {"steps_rerun", s.steps_rerun},
      {"final_step", s.final_step},
      {"skipped_lines", s.skipped_lines},
      {"attempts", std::move(attempts)},
      {"gaps", std::move(gaps)},
  };
}

std::string FormatText(const Summary& s) {
  std::string out;
  Appendf(&out,
          "goodput %.1f%%: %.1f s of useful steps in %.1f s; final step %lld; %zu attempt%s, "
          "%lld steps re-run\n",
          s.goodput * 100, s.useful_step_s, s.wall_s, static_cast<long long>(s.final_step),
          s.attempts.size(), s.attempts.size() == 1 ? "" : "s",
          static_cast<long long>(s.steps_rerun));
  Appendf(&out, "%-3s %-12s %7s %7s %5s %8s %8s %7s %9s  %s\n", "#", "job", "restart", "attempt",
          "world", "resumed", "last", "steps", "step_s", "status");
  for (size_t i = 0; i < s.attempts.size(); ++i) {
    const Attempt& a = s.attempts[i];
    Appendf(&out, "%-3zu %-12s %7d %7d %5d %8lld %8lld %7lld %9.1f  %s\n", i,
            a.job_id.empty() ? "-" : a.job_id.c_str(), a.restart, a.attempt, a.world_size,
            static_cast<long long>(a.resumed_step), static_cast<long long>(a.last_step),
            static_cast<long long>(a.steps), a.step_s, a.status.empty() ? "-" : a.status.c_str());
  }
  for (size_t i = 0; i < s.gaps.size(); ++i) {
    const Gap& g = s.gaps[i];
    Appendf(&out,
            "gap %zu->%zu: %.1f s without a process, %.1f s to restart (rendezvous %.1f s, "
            "checkpoint load %.1f s), first step after %.1f s, %lld steps re-run (%.1f s)\n",
            i, i + 1, g.lost_s, g.restart_s, g.rendezvous_s, g.checkpoint_load_s, g.first_step_s,
            static_cast<long long>(g.steps_rerun), g.rerun_s);
  }
  return out;
}

}  // namespace hpod::goodput
