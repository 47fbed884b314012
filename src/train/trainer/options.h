// hpod-train's options: one struct filled from `--config train.json` and then
// from flags (flags win), validated as a whole so a bad value is reported in
// one line that names the field.
//
// Every option has one name; in train.json it is written with underscores
// (`save_interval`), on the command line with dashes (`--save-interval`).
// The table in options.cc is the single source of both, and of `--help`.
//
// Thread contract: plain values; functions are pure apart from reading files.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/train/model/config.h"

namespace hpod::train {

struct TrainOptions {
  // Model: a preset name ("15m", "ci"), a JSON file (hpod's or HF's
  // config.json), or an object in train.json.
  std::string model = "15m";
  model::Config model_config;  // resolved from `model` by ResolveModel()
  std::string init_from_hf;    // HF Llama directory to initialise from
  std::string export_hf;       // write a HF directory at the end
  std::string export_dtype = "f32";

  // Data.
  std::vector<std::string> data;  // shard paths/globs, or "synthetic"
  std::string tokenizer;          // tokenizer.model: id recorded, copied on export
  int64_t seq_len = 256;
  int64_t batch_size = 8;  // micro-batch
  int64_t grad_accum = 1;
  uint64_t seed = 1337;

  // Optimisation.
  int64_t max_steps = 100;
  int64_t warmup_steps = 10;
  int64_t lr_decay_steps = 0;  // cosine reaches min_lr here; 0: max_steps
  double lr = 5e-4;
  double min_lr = -1;  // < 0: lr / 10
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.95;
  double grad_clip = 1.0;  // 0 disables clipping

  // Runtime.
  int threads = 1;
  std::string matmul = "onednn";

  // Distributed. Under srun, rank and world size come from SLURM_* and the
  // master from scontrol; these flags are for launches outside Slurm.
  int rank = -1;                      // -1: from Slurm, else one process
  int world_size = -1;                // -1: from Slurm, else 1
  std::string master_addr;            // rank 0's host
  int master_port = 0;                // 0: $MASTER_PORT, else 29500
  std::string comm = "gloo";          // collectives: gloo (CPU, TCP) or nccl (GPU)
  double collective_timeout_s = 120;  // a silent peer fails the run after this
  double rendezvous_timeout_s = 300;  // every rank must arrive within this

  // Checkpoints.
  std::string checkpoint_dir;  // default $HPOD_CHECKPOINT_DIR
  int64_t save_interval = 0;   // 0: only at the end and on a stop signal
  int keep_last = 3;
  bool resume = true;

  // Output.
  std::string tensorboard_dir;
  std::string progress = "auto";  // auto, tty, lines, none
  // Not a terminal (a job log): at most one progress line per this many seconds.
  double progress_interval_s = 10;
  int64_t log_interval = 1;
  std::string metrics_jsonl;  // one JSON line per step
  std::string summary_json;
  // The goodput ledger (goodput_writer.h): "" picks $HPOD_GOODPUT_FILE, else
  // <checkpoint_dir>/goodput.jsonl; "none" writes none.
  std::string goodput_file;
  int64_t timing_warmup_steps = 2;  // excluded from tokens/s
  bool dry_run = false;

  // Not an option: Unix seconds when main() began, set by hpod-train's main
  // for the goodput ledger's process_start (0: when Trainer::Run began).
  double process_start_time = 0;
};

// Parses argv (with `--config FILE` applied first). Returns the options, or
// an error whose message is one line naming the flag or field. `help` is set
// (and options are returned unvalidated) for --help.
struct ParsedArgs {
  TrainOptions options;
  bool help = false;
  std::string help_text;
};
StatusOr<ParsedArgs> ParseArgs(int argc, const char* const* argv);

// Applies a train.json object; unknown keys are errors naming the key.
Status ApplyJson(const nlohmann::json& j, const std::string& origin, TrainOptions* o);

// Resolves `model` into model_config and checks every cross-field rule
// (seq_len <= max_seq_len, positive sizes, known enum values, …).
Status Validate(TrainOptions* o);

// The options as JSON (train.json form), for checkpoints and the summary.
nlohmann::json OptionsToJson(const TrainOptions& o);

// A model shape from a JSON file (hpod's fields or a HF config.json); errors
// name the file and the field.
StatusOr<model::Config> ReadModelConfig(const std::string& path);

// Built-in model shapes. "15m" is llama2.c's 15M shape (the benchmark's);
// "ci" is the 0.14M-parameter model tests train in seconds.
StatusOr<model::Config> ModelPreset(const std::string& name);

}  // namespace hpod::train
