#include "hpod/train/model/hf.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>

#include "fmt/format.h"

namespace hpod::train::model {
namespace {

namespace fs = std::filesystem;

StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return NotFoundError(fmt::format("{}: no such file", path));
  std::ifstream in(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return InternalError(fmt::format("reading {} failed", path));
  return data;
}

StatusOr<nlohmann::json> ReadJsonFile(const std::string& path) {
  HPOD_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidArgumentError(fmt::format("{}: not a JSON object", path));
  }
  return j;
}

Status WriteFileSynced(const std::string& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return InternalError(fmt::format("creating {}: {}", path, std::strerror(errno)));
  const char* p = data.data();
  size_t n = data.size();
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      int err = errno;
      ::close(fd);
      return InternalError(fmt::format("writing {}: {}", path, std::strerror(err)));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  const bool synced = ::fsync(fd) == 0;
  const int err = errno;
  if (::close(fd) != 0 || !synced) {
    return InternalError(fmt::format("syncing {}: {}", path, std::strerror(synced ? errno : err)));
  }
  return OkStatus();
}

void SyncDir(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// config.json → Config, with the checks ConfigFromJson leaves to the importer:
// the file must describe a LlamaForCausalLM whose head_dim is hidden/heads.
StatusOr<Config> ReadHfConfig(const std::string& path) {
  HPOD_ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path));
  auto mt = j.find("model_type");
  if (mt == j.end()) {
    return InvalidArgumentError(
        fmt::format("{}: field 'model_type' is missing; hpod-train loads \"llama\"", path));
  }
  if (auto it = j.find("architectures"); it != j.end() && !it->is_null()) {
    bool ok = it->is_array() && !it->empty();
    for (const auto& a : *it)
      ok = ok && a.is_string() && a.get<std::string>() == "LlamaForCausalLM";
    if (!ok) {
      return InvalidArgumentError(fmt::format(
          "{}: field 'architectures' is {}; hpod-train loads LlamaForCausalLM", path, it->dump()));
    }
  }
  auto c = ConfigFromJson(j);
  if (!c.ok()) return c.status().Annotate(path);
  if (auto it = j.find("head_dim"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() != c->head_dim()) {
      return InvalidArgumentError(
          fmt::format("{}: field 'head_dim' = {} is not hidden_size / num_attention_heads = {}; "
                      "hpod-train does not support that",
                      path, it->dump(), c->head_dim()));
    }
  }
  return c;
}

// The weight files of a directory and which of them holds each tensor.
struct WeightSource {
  std::vector<SafetensorsFile> files;
  std::unordered_map<std::string, size_t> where;  // tensor name → files index
  std::string listing;                            // the file that names the tensors
};

StatusOr<WeightSource> OpenWeights(const fs::path& dir) {
  WeightSource src;
  std::error_code ec;
  const fs::path single = dir / "model.safetensors";
  const fs::path index = dir / "model.safetensors.index.json";
  if (fs::exists(single, ec)) {
    HPOD_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(single.string()));
    for (const auto& e : f.entries()) src.where[e.name] = 0;
    src.files.push_back(std::move(f));
    src.listing = single.string();
    return src;
  }
  if (!fs::exists(index, ec)) {
    return NotFoundError(
        fmt::format("{} has neither model.safetensors nor "
                    "model.safetensors.index.json",
                    dir.string()));
  }
  src.listing = index.string();
  HPOD_ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(index.string()));
  auto wm = j.find("weight_map");
  if (wm == j.end() || !wm->is_object()) {
    return InvalidArgumentError(fmt::format("{}: field 'weight_map' is missing", index.string()));
  }
  std::unordered_map<std::string, size_t> shard_index;
  for (const auto& [name, shard] : wm->items()) {
    // A shard is a plain file name in the same directory, nothing else.
    if (!shard.is_string() || shard.get<std::string>().empty() ||
        shard.get<std::string>().find('/') != std::string::npos ||
        shard.get<std::string>() == "." || shard.get<std::string>() == "..") {
      return InvalidArgumentError(
          fmt::format("{}: weight_map entry for {} is {}; expected a file "
                      "name in the same directory",
                      index.string(), name, shard.dump()));
    }
    const std::string file = shard.get<std::string>();
    auto [it, inserted] = shard_index.try_emplace(file, src.files.size());
    if (inserted) {
      HPOD_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open((dir / file).string()));
      src.files.push_back(std::move(f));
    }
    if (src.files[it->second].Find(name) == nullptr) {
      return InvalidArgumentError(
          fmt::format("{} lacks {} (model.safetensors.index.json maps it "
                      "there)",
                      src.files[it->second].path(), name));
    }
    src.where[name] = it->second;
  }
  // Tensors a shard holds beyond the index still count (as extras).
  for (size_t i = 0; i < src.files.size(); ++i) {
    for (const auto& e : src.files[i].entries()) src.where.try_emplace(e.name, i);
  }
  return src;
}

// Reads one tensor of `spec`'s name and shape into `out`.
Status ReadParam(const WeightSource& src, const std::string& name,
                 const std::vector<int64_t>& shape, std::span<float> out, std::string_view why) {
  auto it = src.where.find(name);
  if (it == src.where.end()) {
    return InvalidArgumentError(fmt::format("{} lacks {}{}", src.listing, name, why));
  }
  const SafetensorsFile& f = src.files[it->second];
  const SafetensorsEntry* e = f.Find(name);
  if (e->shape != shape) {
    return InvalidArgumentError(
        fmt::format("{}: tensor {} has shape [{}]; config.json implies [{}]", f.path(), name,
                    fmt::join(e->shape, ", "), fmt::join(shape, ", ")));
  }
  return f.ReadF32(name, out);
}

// "model.layers.<n>.…" → n; nullopt for other names.
std::optional<int64_t> LayerIndex(std::string_view name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  name.remove_prefix(kPrefix.size());
  int64_t n = 0;
  size_t i = 0;
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && i < 9; ++i)
    n = n * 10 + (name[i] - '0');
  if (i == 0) return std::nullopt;
  return n;
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

StatusOr<HfModel> ImportHf(const std::string& dir) {
  const fs::path root(dir);
  HfModel m;
  const std::string config_path = (root / "config.json").string();
  HPOD_ASSIGN_OR_RETURN(m.config, ReadHfConfig(config_path));
  HPOD_ASSIGN_OR_RETURN(WeightSource src, OpenWeights(root));

  const std::vector<ParamSpec> specs = ParamSpecs(m.config);
  m.params.resize(static_cast<size_t>(NumParams(m.config)));
  std::set<std::string_view> expected;
  for (const ParamSpec& s : specs) {
    expected.insert(s.name);
    std::string_view why = s.name == "lm_head.weight"
                               ? " (config.json has tie_word_embeddings = false)"
                               : std::string_view();
    HPOD_RETURN_IF_ERROR(ReadParam(src, s.name, s.shape,
                                   std::span<float>(m.params.data() + s.offset, s.numel), why));
  }
  if (m.config.tied_embeddings && src.where.count("lm_head.weight") != 0) {
    // Some exporters store the tied head anyway; accept it only as a copy.
    const ParamSpec& embed = specs.front();
    std::vector<float> head(static_cast<size_t>(embed.numel));
    HPOD_RETURN_IF_ERROR(ReadParam(src, "lm_head.weight", embed.shape, head, ""));
    if (std::memcmp(head.data(), m.params.data() + embed.offset, head.size() * sizeof(float)) !=
        0) {
      return InvalidArgumentError(
          fmt::format("{} has an lm_head.weight that differs from model.embed_tokens.weight, but "
                      "config.json has tie_word_embeddings = true",
                      src.listing));
    }
    expected.insert("lm_head.weight");
  }
  for (const auto& f : src.files) {
    for (const SafetensorsEntry& e : f.entries()) {
      if (expected.count(e.name) != 0 || EndsWith(e.name, "rotary_emb.inv_freq")) continue;
      auto layer = LayerIndex(e.name);
      if (layer && *layer >= m.config.n_layers) {
        return InvalidArgumentError(
            fmt::format("{} has {} but config.json says num_hidden_layers = {}", f.path(), e.name,
                        m.config.n_layers));
      }
      if (EndsWith(e.name, ".bias")) {
        return InvalidArgumentError(fmt::format(
            "{} has {}; hpod-train's Llama has no biases (attention_bias/mlp_bias unsupported)",
            f.path(), e.name));
      }
      m.warnings.push_back(fmt::format("{}: ignoring unexpected tensor {}", f.path(), e.name));
    }
  }
  return m;
}

Status ExportHf(const std::string& dir, const Config& c, const float* params, DType dtype,
                const std::string& tokenizer_model) {
  HPOD_RETURN_IF_ERROR(ValidateConfig(c));
  if (dtype == DType::kOther) {
    return InvalidArgumentError(
        fmt::format("exporting {}: dtype must be float32, bfloat16 or float16", dir));
  }
  if (params == nullptr) return InvalidArgumentError(fmt::format("exporting {}: no params", dir));
  fs::path target(dir);
  if (!target.has_filename()) target = target.parent_path();  // "out/" → "out"
  fs::path parent = target.parent_path();
  if (parent.empty()) parent = ".";
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) return InternalError(fmt::format("creating {}: {}", parent.string(), ec.message()));
  if (fs::exists(target, ec) && !fs::is_directory(target, ec)) {
    return FailedPreconditionError(
        fmt::format("exporting {}: exists and is not a directory", target.string()));
  }
  const fs::path tmp = parent / fmt::format(".{}.tmp.{}", target.filename().string(), ::getpid());
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec)) {
    return InternalError(fmt::format("creating {}: {}", tmp.string(), ec.message()));
  }

  auto build = [&]() -> Status {
    nlohmann::json config = ConfigToHfJson(c);
    config["torch_dtype"] = TorchDTypeName(dtype);
    HPOD_RETURN_IF_ERROR(WriteFileSynced((tmp / "config.json").string(), config.dump(2) + "\n"));
    std::vector<TensorToWrite> tensors;
    for (const ParamSpec& s : ParamSpecs(c)) {
      tensors.push_back(TensorToWrite{s.name, s.shape, params + s.offset});
    }
    HPOD_RETURN_IF_ERROR(
        WriteSafetensors((tmp / "model.safetensors").string(), tensors, dtype, {{"format", "pt"}}));
    if (!tokenizer_model.empty()) {
      HPOD_ASSIGN_OR_RETURN(std::string tok, ReadWholeFile(tokenizer_model));
      HPOD_RETURN_IF_ERROR(WriteFileSynced((tmp / "tokenizer.model").string(), tok));
    }
    SyncDir(tmp.string());
    if (!fs::exists(target, ec)) {
      if (std::rename(tmp.c_str(), target.c_str()) != 0) {
        return InternalError(fmt::format("renaming {} to {}: {}", tmp.string(), target.string(),
                                         std::strerror(errno)));
      }
      return OkStatus();
    }
    // Replace the old directory in one step; `tmp` then holds the old one.
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
      return OkStatus();
    }
    // Filesystems without RENAME_EXCHANGE: move the old one aside first.
    const fs::path old = parent / fmt::format(".{}.old.{}", target.filename().string(), ::getpid());
    fs::remove_all(old, ec);
    if (std::rename(target.c_str(), old.c_str()) != 0) {
      return InternalError(fmt::format("replacing {}: {}", target.string(), std::strerror(errno)));
    }
    if (std::rename(tmp.c_str(), target.c_str()) != 0) {
      int err = errno;
      std::rename(old.c_str(), target.c_str());  // put the old directory back
      return InternalError(fmt::format("replacing {}: {}", target.string(), std::strerror(err)));
    }
    fs::remove_all(old, ec);
    return OkStatus();
  };
  Status s = build();
  fs::remove_all(tmp, ec);  // the partial export, or the exchanged old directory
  if (s.ok()) SyncDir(parent.string());
  return s;
}

}  // namespace hpod::train::model
