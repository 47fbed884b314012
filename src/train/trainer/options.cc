#include "hpod/train/trainer/options.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <variant>

#include "fmt/format.h"
#include "hpod/base/file_util.h"

namespace hpod::train {
namespace {

using Target = std::variant<std::string*, int64_t*, int*, uint64_t*, double*, bool*,
                            std::vector<std::string>*>;

struct OptionDef {
  const char* name;  // train.json key; the flag is the same with dashes
  Target target;
  const char* help;
};

// The one table of options: flags, train.json keys and --help come from it.
std::vector<OptionDef> Table(TrainOptions* o) {
  return {
      {"model", &o->model,
       "model shape: a preset (15m = llama2.c 15M, ci = 0.14M test model), or a "
       "JSON file (hpod's fields or a HF config.json); in train.json also an "
       "object"},
      {"init_from_hf", &o->init_from_hf,
       "initialise weights (and the model shape) from a HF Llama directory: "
       "config.json + model.safetensors (F32/BF16/F16)"},
      {"export_hf", &o->export_hf, "at the end, write the model as a HF Llama directory here"},
      {"export_dtype", &o->export_dtype, "dtype of --export-hf: f32, bf16, f16"},
      {"data", &o->data,
       "token shards written by hpod-data (paths or globs; on the command line "
       "comma-separated), or 'synthetic' for random tokens"},
      {"tokenizer", &o->tokenizer,
       "the tokenizer.model the shards were made with: its id goes into "
       "checkpoints, and --export-hf copies it"},
      {"seq_len", &o->seq_len, "tokens per sample"},
      {"batch_size", &o->batch_size, "samples per micro-batch"},
      {"grad_accum", &o->grad_accum, "micro-batches per optimizer step (gradient accumulation)"},
      {"seed", &o->seed, "seed of the weight init and of the data order"},
      {"max_steps", &o->max_steps, "optimizer steps in total (the run ends there)"},
      {"warmup_steps", &o->warmup_steps, "linear learning-rate warmup steps"},
      {"lr_decay_steps", &o->lr_decay_steps,
       "step at which the cosine decay reaches min_lr (default max_steps); set it "
       "to keep the schedule when a run is extended or cut short"},
      {"lr", &o->lr, "peak learning rate (AdamW)"},
      {"min_lr", &o->min_lr, "learning rate at max_steps after cosine decay (default lr/10)"},
      {"weight_decay", &o->weight_decay,
       "AdamW decoupled weight decay, on matrices only (not norm gains)"},
      {"beta1", &o->beta1, "AdamW beta1"},
      {"beta2", &o->beta2, "AdamW beta2"},
      {"grad_clip", &o->grad_clip, "clip gradients to this global L2 norm; 0 = off"},
      {"threads", &o->threads,
       "CPU threads for matmuls and kernels (results are bit-identical for a "
       "given seed and thread count)"},
      {"matmul", &o->matmul, "matmul library: onednn or openblas"},
      {"rank", &o->rank,
       "this process's rank in a distributed run (outside Slurm; under srun it is "
       "SLURM_PROCID)"},
      {"world_size", &o->world_size,
       "processes in a distributed run (outside Slurm; under srun the step's task count)"},
      {"master_addr", &o->master_addr,
       "rank 0's host for the rendezvous (outside Slurm; under srun the first node of "
       "the job's current node list)"},
      {"master_port", &o->master_port,
       "rendezvous port on rank 0 (default $MASTER_PORT, else 29500)"},
      {"comm", &o->comm,
       "collectives between ranks: gloo (CPU, over TCP) or nccl (one GPU per rank, the local "
       "rank's; host-staged while training runs on the CPU)"},
      {"collective_timeout_s", &o->collective_timeout_s,
       "a rank that dies or hangs fails every other rank's next collective within "
       "this many seconds"},
      {"rendezvous_timeout_s", &o->rendezvous_timeout_s,
       "every rank must reach the rendezvous within this many seconds"},
      {"checkpoint_dir", &o->checkpoint_dir,
       "where checkpoints go and resume comes from (default "
       "$HPOD_CHECKPOINT_DIR; empty = no checkpoints)"},
      {"save_interval", &o->save_interval,
       "save every N steps, asynchronously (0 = only at the end and on "
       "SIGTERM/SIGINT); SIGUSR1 saves after the current step as well"},
      {"keep_last", &o->keep_last, "keep the newest N complete checkpoints"},
      {"resume", &o->resume,
       "resume from the newest complete checkpoint in checkpoint_dir "
       "(--no-resume starts over)"},
      {"tensorboard_dir", &o->tensorboard_dir,
       "write TensorBoard event files (events.out.tfevents.*) here"},
      {"progress", &o->progress,
       "progress line: auto (\\r on a terminal, a line per update in job logs), "
       "tty, lines, none"},
      {"progress_interval", &o->progress_interval_s,
       "in job logs (not a terminal), seconds between progress lines at least"},
      {"log_interval", &o->log_interval, "steps between progress/TensorBoard updates"},
      {"metrics_jsonl", &o->metrics_jsonl,
       "append one JSON line per step (step, loss, lr, norms, timings) to this "
       "file"},
      {"summary_json", &o->summary_json,
       "write a JSON summary (steps, tokens/s, loss, checkpoint stalls) at the "
       "end and on a clean stop"},
      {"goodput_file", &o->goodput_file,
       "append the goodput ledger (one JSON line per start, step, checkpoint, end; rank 0) "
       "here (default $HPOD_GOODPUT_FILE, else <checkpoint-dir>/goodput.jsonl; none = off)"},
      {"timing_warmup_steps", &o->timing_warmup_steps,
       "first steps of a run left out of tokens/s (reported apart)"},
      {"dry_run", &o->dry_run,
       "print the plan (parameters, FLOPs per token, memory, data, checkpoints) "
       "and exit"},
  };
}

std::string FlagName(const char* key) {
  std::string s = std::string("--") + key;
  for (char& c : s) {
    if (c == '_') c = '-';
  }
  return s;
}

Status TypeError(const std::string& origin, const char* key, const char* want,
                 const nlohmann::json& got) {
  return InvalidArgumentError(
      fmt::format("{}: field '{}' must be {}, got {}", origin, key, want, got.dump()));
}

Status ApplyOne(const OptionDef& def, const nlohmann::json& v, const std::string& origin) {
  return std::visit(
      [&](auto* p) -> Status {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, std::string>) {
          if (!v.is_string()) return TypeError(origin, def.name, "a string", v);
          *p = v.get<std::string>();
        } else if constexpr (std::is_same_v<T, bool>) {
          if (!v.is_boolean()) {
            return TypeError(origin, def.name, "true or false", v);
          }
          *p = v.get<bool>();
        } else if constexpr (std::is_same_v<T, double>) {
          if (!v.is_number()) return TypeError(origin, def.name, "a number", v);
          *p = v.get<double>();
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          if (v.is_string()) {
            *p = {v.get<std::string>()};
          } else if (v.is_array() &&
                     std::all_of(v.begin(), v.end(), [](const auto& e) { return e.is_string(); })) {
            *p = v.get<std::vector<std::string>>();
          } else {
            return TypeError(origin, def.name, "a string or a list of strings", v);
          }
        } else {
          if (!v.is_number_integer()) {
            return TypeError(origin, def.name, "an integer", v);
          }
          if constexpr (std::is_same_v<T, uint64_t>) {
            if (v.is_number_unsigned()) {
              *p = v.get<uint64_t>();
            } else if (v.get<int64_t>() >= 0) {
              *p = static_cast<uint64_t>(v.get<int64_t>());
            } else {
              return TypeError(origin, def.name, "a non-negative integer", v);
            }
          } else {
            // An unsigned value above INT64_MAX or an int field's overflow
            // would wrap silently.
            if (v.is_number_unsigned() &&
                v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
              return TypeError(origin, def.name, "an integer in range", v);
            }
            const int64_t x = v.get<int64_t>();
            if (x < std::numeric_limits<T>::min() || x > std::numeric_limits<T>::max()) {
              return TypeError(origin, def.name, "an integer in range", v);
            }
            *p = static_cast<T>(x);
          }
        }
        return OkStatus();
      },
      def.target);
}

StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  HPOD_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgumentError(fmt::format("{} is not valid JSON", path));
  }
  return j;
}

// `model` in train.json may be an object; it is kept as its JSON text so the
// option stays one string (a preset, a path, or inline JSON).
constexpr char kInlinePrefix[] = "json:";

}  // namespace

StatusOr<model::Config> ReadModelConfig(const std::string& path) {
  HPOD_ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path));
  auto c = model::ConfigFromJson(j);
  if (!c.ok()) return InvalidArgumentError(fmt::format("{}: {}", path, c.status().message()));
  return *c;
}

StatusOr<model::Config> ModelPreset(const std::string& name) {
  model::Config c;  // defaults: llama2.c's 15M shape
  if (name == "15m") return c;
  if (name == "ci") {
    // training-building-blocks.md §8's CI-sized model.
    c.dim = 64;
    c.n_layers = 2;
    c.n_heads = 4;
    c.n_kv_heads = 4;
    c.vocab_size = 512;
    c.hidden_dim = 192;  // llama2.c: int(2 * 4 * dim / 3) rounded up to 32
    c.max_seq_len = 256;
    return c;
  }
  return NotFoundError(
      fmt::format("unknown model preset '{}' (presets: 15m, ci; or a JSON file)", name));
}

Status ApplyJson(const nlohmann::json& j, const std::string& origin, TrainOptions* o) {
  if (!j.is_object()) {
    return InvalidArgumentError(fmt::format("{} must hold a JSON object", origin));
  }
  auto table = Table(o);
  for (const auto& [key, value] : j.items()) {
    if (key == "model" && value.is_object()) {
      o->model = kInlinePrefix + value.dump();
      continue;
    }
    auto it =
        std::find_if(table.begin(), table.end(), [&](const OptionDef& d) { return key == d.name; });
    if (it == table.end()) {
      return InvalidArgumentError(
          fmt::format("{}: unknown field '{}' (hpod-train --help lists the options)", origin, key));
    }
    HPOD_RETURN_IF_ERROR(ApplyOne(*it, value, origin));
  }
  return OkStatus();
}

StatusOr<ParsedArgs> ParseArgs(int argc, const char* const* argv) {
  ParsedArgs out;
  TrainOptions& o = out.options;
  // --config is applied first, so flags given beside it override the file.
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string path;
    if (a == "--config" && i + 1 < argc) {
      path = argv[i + 1];
    } else if (a.rfind("--config=", 0) == 0) {
      path = a.substr(9);
    } else {
      continue;
    }
    HPOD_ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path));
    HPOD_RETURN_IF_ERROR(ApplyJson(j, path, &o));
  }

  CLI::App app{
      "hpod-train: trains a Llama-architecture model, as one process or as one rank of "
      "a data-parallel run (under srun, or with --rank --world-size --master-addr).\n"
      "SIGTERM/SIGINT save and exit 128+signal; SIGUSR1 saves and goes on.\nOptions may "
      "also come from "
      "--config train.json, whose keys are the option names with underscores "
      "(save_interval); flags override the file."};
  app.set_help_flag("-h,--help", "print this help and exit");
  std::string config_path;
  app.add_option("--config", config_path,
                 "train.json with any of the options below (flags override it)");
  for (const OptionDef& def : Table(&o)) {
    std::string flag = FlagName(def.name);
    std::visit(
        [&](auto* p) {
          using T = std::remove_pointer_t<decltype(p)>;
          if constexpr (std::is_same_v<T, bool>) {
            if (std::string(def.name) == "resume") {
              app.add_flag("--resume,!--no-resume", *p, def.help);
            } else {
              app.add_flag(flag, *p, def.help);
            }
          } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
            app.add_option(flag, *p, def.help)->delimiter(',');
          } else {
            // A flag given twice (a script's default, then the user's) takes the last.
            app.add_option(flag, *p, def.help)
                ->capture_default_str()
                ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
          }
        },
        def.target);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out.help = true;
    out.help_text = app.help();
    return out;
  } catch (const CLI::ParseError& e) {
    return InvalidArgumentError(fmt::format("{} (hpod-train --help lists the options)", e.what()));
  }
  if (o.checkpoint_dir.empty()) {
    if (const char* env = std::getenv("HPOD_CHECKPOINT_DIR"); env && *env) {
      o.checkpoint_dir = env;
    }
  }
  HPOD_RETURN_IF_ERROR(Validate(&o));
  return out;
}

Status Validate(TrainOptions* o) {
  // The model: preset, inline JSON (from train.json) or a file.
  if (!o->init_from_hf.empty()) {
    // The HF directory's config.json decides the shape; the trainer reads it.
  } else if (o->model.rfind(kInlinePrefix, 0) == 0) {
    auto j = nlohmann::json::parse(o->model.substr(sizeof(kInlinePrefix) - 1));
    auto c = model::ConfigFromJson(j);
    if (!c.ok()) return InvalidArgumentError("model: " + c.status().message());
    o->model_config = *c;
  } else if (auto preset = ModelPreset(o->model); preset.ok()) {
    o->model_config = *preset;
  } else if (o->model.find('/') != std::string::npos || o->model.ends_with(".json")) {
    HPOD_ASSIGN_OR_RETURN(o->model_config, ReadModelConfig(o->model));
  } else {
    return preset.status();
  }

  auto positive = [](const char* key, int64_t v) -> Status {
    if (v <= 0) {
      return InvalidArgumentError(fmt::format("{} = {} must be at least 1", FlagName(key), v));
    }
    return OkStatus();
  };
  HPOD_RETURN_IF_ERROR(positive("seq_len", o->seq_len));
  HPOD_RETURN_IF_ERROR(positive("batch_size", o->batch_size));
  HPOD_RETURN_IF_ERROR(positive("grad_accum", o->grad_accum));
  HPOD_RETURN_IF_ERROR(positive("max_steps", o->max_steps));
  HPOD_RETURN_IF_ERROR(positive("threads", o->threads));
  for (auto [key, v] : {std::pair{"collective_timeout_s", o->collective_timeout_s},
                        std::pair{"rendezvous_timeout_s", o->rendezvous_timeout_s}}) {
    if (!(v > 0) || v > 86400) {
      return InvalidArgumentError(fmt::format("{} = {} must be in (0, 86400]", FlagName(key), v));
    }
  }
  if (o->comm != "gloo" && o->comm != "nccl") {
    return InvalidArgumentError(fmt::format("--comm = {} must be gloo or nccl", o->comm));
  }
  if (o->master_port < 0 || o->master_port > 65535) {
    return InvalidArgumentError(
        fmt::format("--master-port = {} must be in 1..65535", o->master_port));
  }
  HPOD_RETURN_IF_ERROR(positive("log_interval", o->log_interval));
  HPOD_RETURN_IF_ERROR(positive("keep_last", o->keep_last));
  if (o->threads > 256) {
    return InvalidArgumentError(fmt::format("--threads = {} is more than 256", o->threads));
  }
  if (o->init_from_hf.empty() && o->seq_len > o->model_config.max_seq_len) {
    return InvalidArgumentError(fmt::format("--seq-len = {} exceeds the model's max_seq_len {}",
                                            o->seq_len, o->model_config.max_seq_len));
  }
  if (o->warmup_steps < 0 || o->save_interval < 0 || o->timing_warmup_steps < 0 ||
      o->lr_decay_steps < 0) {
    return InvalidArgumentError(
        "--warmup-steps, --lr-decay-steps, --save-interval and --timing-warmup-steps must "
        "not be negative");
  }
  auto finite_nonneg = [](const char* key, double v) -> Status {
    if (!std::isfinite(v) || v < 0) {
      return InvalidArgumentError(
          fmt::format("{} = {} must be a finite number >= 0", FlagName(key), v));
    }
    return OkStatus();
  };
  HPOD_RETURN_IF_ERROR(finite_nonneg("lr", o->lr));
  HPOD_RETURN_IF_ERROR(finite_nonneg("weight_decay", o->weight_decay));
  HPOD_RETURN_IF_ERROR(finite_nonneg("grad_clip", o->grad_clip));
  HPOD_RETURN_IF_ERROR(finite_nonneg("progress_interval", o->progress_interval_s));
  if (o->lr == 0) return InvalidArgumentError("--lr must be greater than 0");
  if (o->min_lr < 0) o->min_lr = o->lr / 10;
  if (o->min_lr > o->lr) {
    return InvalidArgumentError(
        fmt::format("--min-lr = {} must not exceed --lr = {}", o->min_lr, o->lr));
  }
  for (auto [key, v] : {std::pair{"beta1", o->beta1}, std::pair{"beta2", o->beta2}}) {
    if (!(v >= 0 && v < 1)) {
      return InvalidArgumentError(fmt::format("{} = {} must be in [0, 1)", FlagName(key), v));
    }
  }
  auto one_of = [](const char* key, const std::string& v,
                   std::initializer_list<const char*> allowed) -> Status {
    for (const char* a : allowed) {
      if (v == a) return OkStatus();
    }
    std::string list;
    for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
    return InvalidArgumentError(
        fmt::format("{} = '{}' must be one of: {}", FlagName(key), v, list));
  };
  HPOD_RETURN_IF_ERROR(one_of("matmul", o->matmul, {"onednn", "openblas"}));
  HPOD_RETURN_IF_ERROR(one_of("progress", o->progress, {"auto", "tty", "lines", "none"}));
  HPOD_RETURN_IF_ERROR(one_of("export_dtype", o->export_dtype, {"f32", "bf16", "f16"}));
  if (o->data.empty()) {
    return InvalidArgumentError(
        "--data is required: token shards from `hpod-data tokenize`, or 'synthetic'");
  }
  if (o->data.size() > 1 &&
      std::find(o->data.begin(), o->data.end(), "synthetic") != o->data.end()) {
    return InvalidArgumentError("--data synthetic cannot be mixed with shard files");
  }
  return OkStatus();
}

nlohmann::json OptionsToJson(const TrainOptions& o) {
  TrainOptions copy = o;
  nlohmann::json j = nlohmann::json::object();
  for (const OptionDef& def : Table(&copy)) {
    std::visit([&](auto* p) { j[def.name] = *p; }, def.target);
  }
  if (o.model.rfind(kInlinePrefix, 0) == 0) {
    j["model"] = nlohmann::json::parse(o.model.substr(sizeof(kInlinePrefix) - 1));
  }
  return j;
}

}  // namespace hpod::train
