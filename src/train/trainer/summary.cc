#include "hpod/train/trainer/summary.h"

#include <cstdio>
#include <filesystem>

#include "fmt/format.h"
#include "hpod/base/file_util.h"

namespace hpod::train {

void Summary::AddStep(int64_t index, double seconds, int64_t tokens, int64_t warmup) {
  if (index <= warmup) {
    warmup_steps += 1;
    warmup_s += seconds;
    warmup_tokens += tokens;
  } else {
    timed_steps += 1;
    timed_s += seconds;
    timed_tokens += tokens;
  }
}

nlohmann::json SummaryToJson(const Summary& s) {
  auto rate = [](double amount, double seconds) -> nlohmann::json {
    if (seconds <= 0) return nullptr;
    return amount / seconds;
  };
  nlohmann::json saves = nlohmann::json::array();
  double write_s = 0;
  int64_t write_bytes = 0;
  double max_stall = 0;
  for (const auto& r : s.saves) {
    saves.push_back({{"step", r.step},
                     {"stall_s", r.stall_s},
                     {"snapshot_s", r.snapshot_s},
                     {"write_s", r.write_s},
                     {"bytes", r.bytes},
                     {"write_mb_per_s", rate(r.bytes / 1e6, r.write_s)}});
    write_s += r.write_s;
    write_bytes += r.bytes;
    max_stall = std::max(max_stall, r.stall_s);
  }
  nlohmann::json loads = nlohmann::json::array();
  for (const auto& r : s.loads) {
    loads.push_back({{"path", r.path},
                     {"step", r.step},
                     {"load_s", r.load_s},
                     {"bytes", r.bytes},
                     {"load_mb_per_s", rate(r.bytes / 1e6, r.load_s)}});
  }
  const double mean_step = s.timed_steps > 0 ? s.timed_s / static_cast<double>(s.timed_steps) : 0;
  // The in-loop stall per save as a fraction of a step: the figure the
  // async design promises to keep small.
  nlohmann::json stall_fraction = nullptr;
  if (s.in_loop_saves > 0 && mean_step > 0) {
    double in_loop = s.stall_s_total / static_cast<double>(s.in_loop_saves);
    stall_fraction = in_loop / mean_step;
  }
  const int64_t steps_run = s.end_step - s.start_step;
  nlohmann::json out{
      {"start_step", s.start_step},
      {"end_step", s.end_step},
      {"steps_run", steps_run},
      {"resumed_from_step",
       s.resumed_from_step < 0 ? nlohmann::json(nullptr) : nlohmann::json(s.resumed_from_step)},
      {"consumed_samples", s.consumed_samples},
      {"tokens", s.warmup_tokens + s.timed_tokens},
      {"final_loss", s.final_loss},
      {"elapsed_s", s.elapsed_s},
      {"stopped_by_signal",
       s.stop_signal == 0 ? nlohmann::json(nullptr) : nlohmann::json(s.stop_signal)},
      {"num_params", s.num_params},
      {"world_size", s.world_size},
      {"flops_per_token", s.flops_per_token},
      {"throughput",
       {{"tokens_per_s", rate(static_cast<double>(s.timed_tokens), s.timed_s)},
        {"steps", s.timed_steps},
        {"seconds", s.timed_s},
        {"mean_step_s", mean_step},
        {"communication_s", s.comm_s_timed},
        {"communication_fraction",
         s.timed_s > 0 ? nlohmann::json(s.comm_s_timed / s.timed_s) : nlohmann::json(nullptr)},
        {"gflops_per_s",
         rate(s.flops_per_token * static_cast<double>(s.timed_tokens) / 1e9, s.timed_s)}}},
      {"warmup",
       {{"steps", s.warmup_steps},
        {"seconds", s.warmup_s},
        {"tokens_per_s", rate(static_cast<double>(s.warmup_tokens), s.warmup_s)}}},
      {"checkpoint",
       {{"saves", saves},
        {"loads", loads},
        {"stall_s_total", s.stall_s_total},
        {"in_loop_saves", s.in_loop_saves},
        {"save_errors", s.save_errors},
        {"stall_s_max", max_stall},
        {"stall_fraction_of_step", stall_fraction},
        {"final_save_s", s.final_save_s},
        {"write_mb_per_s", rate(write_bytes / 1e6, write_s)}}},
      {"warnings", s.warnings},
  };
  if (!s.goodput.is_null()) out["goodput"] = s.goodput;
  return out;
}

Status WriteSummary(const std::string& path, const Summary& s) {
  Status st = WriteFileAtomic(path, SummaryToJson(s).dump(2) + "\n");
  if (!st.ok()) return Status(st.code(), "--summary-json: " + st.message());
  return OkStatus();
}

}  // namespace hpod::train
