#include "hpod/train/model/hf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

namespace hpod::train::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
namespace fs = std::filesystem;

Config SmallConfig(bool tied, bool gqa) {
  Config c;
  c.dim = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = gqa ? 2 : 4;
  c.vocab_size = 32;
  c.hidden_dim = 24;
  c.max_seq_len = 64;
  c.rope_theta = 500000.0;
  c.norm_eps = 1e-6;
  c.tied_embeddings = tied;
  return c;
}

// k/64 for |k| <= 50: exact in F32, BF16 and F16.
std::vector<float> RepresentableParams(const Config& c) {
  std::vector<float> p(static_cast<size_t>(NumParams(c)));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<float>(int((i * 37) % 101) - 50) / 64;
  return p;
}

std::vector<float> SineParams(const Config& c) {
  std::vector<float> p(static_cast<size_t>(NumParams(c)));
  for (size_t i = 0; i < p.size(); ++i) p[i] = 0.1f * std::sin(static_cast<float>(i) * 0.7f);
  return p;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void WriteFile(const std::string& path, const std::string& data) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// A tensor set a test edits before writing it as an HF directory.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
using TensorMap = std::map<std::string, Tensor>;

TensorMap TensorsOf(const Config& c, const std::vector<float>& params) {
  TensorMap m;
  for (const ParamSpec& s : ParamSpecs(c)) {
    m[s.name] = {s.shape, std::vector<float>(params.begin() + s.offset,
                                             params.begin() + s.offset + s.numel)};
  }
  return m;
}

class HfTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/hpod_hf_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { fs::remove_all(root_); }

  // Writes `dir` with config.json from `config` (as JSON) and `tensors` as
  // model.safetensors (or as `file`).
  std::string WriteDir(const std::string& name, const nlohmann::json& config,
                       const TensorMap& tensors, const std::string& file = "model.safetensors") {
    std::string dir = root_ + "/" + name;
    fs::create_directories(dir);
    WriteFile(dir + "/config.json", config.dump());
    std::vector<TensorToWrite> list;
    for (const auto& [n, t] : tensors) list.push_back({n, t.shape, t.data.data()});
    EXPECT_TRUE(WriteSafetensors(dir + "/" + file, list, DType::kF32, {{"format", "pt"}}).ok());
    return dir;
  }

  // Imports `dir` expecting an error; returns its message (checked to be one line).
  std::string ImportError(const std::string& dir, StatusCode code) {
    auto m = ImportHf(dir);
    EXPECT_FALSE(m.ok());
    if (m.ok()) return "";
    EXPECT_EQ(m.status().code(), code) << m.status().ToString();
    EXPECT_THAT(m.status().message(), Not(HasSubstr("\n")));
    return m.status().message();
  }

  std::string root_;
};

TEST_F(HfTest, F32RoundTripIsExactTiedUntiedGqa) {
  const std::string tokenizer = root_ + "/tok.model";
  WriteFile(tokenizer, std::string("sentencepiece\0bytes", 19));
  for (bool tied : {true, false}) {
    for (bool gqa : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "tied=" << tied << " gqa=" << gqa);
      const Config c = SmallConfig(tied, gqa);
      const std::vector<float> params = SineParams(c);
      const std::string dir = root_ + "/out/model";
      ASSERT_TRUE(ExportHf(dir, c, params.data(), DType::kF32, tokenizer).ok());

      auto m = ImportHf(dir);
      ASSERT_TRUE(m.ok()) << m.status().ToString();
      EXPECT_EQ(ConfigToJson(m->config), ConfigToJson(c));
      ASSERT_EQ(m->params.size(), params.size());
      EXPECT_EQ(0, std::memcmp(m->params.data(), params.data(), params.size() * 4));
      EXPECT_THAT(m->warnings, IsEmpty());

      auto j = nlohmann::json::parse(ReadFile(dir + "/config.json"));
      EXPECT_EQ(j["torch_dtype"], "float32");
      EXPECT_EQ(j["model_type"], "llama");
      EXPECT_EQ(j["tie_word_embeddings"], tied);
      EXPECT_EQ(ReadFile(dir + "/tokenizer.model"), std::string("sentencepiece\0bytes", 19));
      auto f = SafetensorsFile::Open(dir + "/model.safetensors");
      ASSERT_TRUE(f.ok());
      EXPECT_EQ(f->metadata(), nlohmann::json({{"format", "pt"}}));
      EXPECT_EQ(f->entries().size(), ParamSpecs(c).size());
      EXPECT_EQ(f->Find("lm_head.weight") != nullptr, !tied);
      // Replaced in place: only the directory itself is left in its parent.
      EXPECT_EQ(std::distance(fs::directory_iterator(root_ + "/out"), {}), 1);
      std::vector<std::string> files;
      for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path().filename());
      std::sort(files.begin(), files.end());
      EXPECT_THAT(files, ElementsAre("config.json", "model.safetensors", "tokenizer.model"));
    }
  }
}

TEST_F(HfTest, Bf16AndF16RoundTripWithinRounding) {
  const Config c = SmallConfig(/*tied=*/false, /*gqa=*/true);
  const std::vector<float> sine = SineParams(c);
  const std::vector<float> exact = RepresentableParams(c);
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    SCOPED_TRACE(std::string(DTypeName(dtype)));
    const std::string dir = root_ + "/" + std::string(DTypeName(dtype));
    ASSERT_TRUE(ExportHf(dir, c, sine.data(), dtype, "").ok());
    EXPECT_FALSE(fs::exists(dir + "/tokenizer.model"));
    auto j = nlohmann::json::parse(ReadFile(dir + "/config.json"));
    EXPECT_EQ(j["torch_dtype"], dtype == DType::kBF16 ? "bfloat16" : "float16");
    auto m = ImportHf(dir);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    const double tol = dtype == DType::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
    for (size_t i = 0; i < sine.size(); ++i) {
      const float want =
          dtype == DType::kBF16 ? BF16ToF32(F32ToBF16(sine[i])) : F16ToF32(F32ToF16(sine[i]));
      ASSERT_EQ(m->params[i], want) << i;
      if (std::fabs(sine[i]) > 1e-4) {  // F16's normal range starts at 6.1e-5
        ASSERT_LE(std::fabs(m->params[i] - sine[i]), std::fabs(sine[i]) * tol) << i;
      }
    }
    ASSERT_TRUE(ExportHf(dir, c, exact.data(), dtype, "").ok());  // replaces the directory
    m = ImportHf(dir);
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_EQ(0, std::memcmp(m->params.data(), exact.data(), exact.size() * 4));
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), {}), 2);
}

TEST_F(HfTest, ExportReplacesAnExistingDirectoryWhole) {
  const Config c = SmallConfig(true, true);
  const std::string dir = root_ + "/m";
  fs::create_directories(dir);
  WriteFile(dir + "/stale.bin", "old");
  std::vector<float> p = RepresentableParams(c);
  ASSERT_TRUE(ExportHf(dir + "/", c, p.data(), DType::kF32, "").ok());
  EXPECT_FALSE(fs::exists(dir + "/stale.bin"));
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors"));
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), {}), 1);

  Status s = ExportHf(dir, c, p.data(), DType::kF32, root_ + "/no-such-tokenizer.model");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("no-such-tokenizer.model"));
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors"));  // the old export is intact
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), {}), 1);

  WriteFile(root_ + "/file", "x");
  EXPECT_EQ(ExportHf(root_ + "/file", c, p.data(), DType::kF32, "").code(),
            StatusCode::kFailedPrecondition);
  Config bad = c;
  bad.n_kv_heads = 3;
  EXPECT_THAT(ExportHf(dir, bad, p.data(), DType::kF32, "").message(), HasSubstr("n_kv_heads"));
}

TEST_F(HfTest, ShardedDirectoryImports) {
  const Config c = SmallConfig(false, true);
  const std::vector<float> params = SineParams(c);
  TensorMap all = TensorsOf(c, params);
  TensorMap first, second;
  nlohmann::json index = {{"metadata", {{"total_size", NumParams(c) * 4}}}, {"weight_map", {}}};
  for (auto& [name, t] : all) {
    bool one = name.find("layers.1.") == std::string::npos && name != "lm_head.weight";
    (one ? first : second)[name] = t;
    index["weight_map"][name] =
        one ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  const std::string dir =
      WriteDir("sharded", ConfigToHfJson(c), first, "model-00001-of-00002.safetensors");
  std::vector<TensorToWrite> list;
  for (const auto& [n, t] : second) list.push_back({n, t.shape, t.data.data()});
  ASSERT_TRUE(
      WriteSafetensors(dir + "/model-00002-of-00002.safetensors", list, DType::kBF16, {}).ok());
  WriteFile(dir + "/model.safetensors.index.json", index.dump());

  auto m = ImportHf(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  for (const ParamSpec& s : ParamSpecs(c)) {
    const bool bf16 = second.count(s.name) != 0;
    for (int64_t i = 0; i < s.numel; ++i) {
      const float v = params[s.offset + i];
      ASSERT_EQ(m->params[s.offset + i], bf16 ? BF16ToF32(F32ToBF16(v)) : v) << s.name;
    }
  }

  index["weight_map"]["model.norm.weight"] = "model-00003-of-00003.safetensors";
  WriteFile(dir + "/model.safetensors.index.json", index.dump());
  EXPECT_THAT(ImportError(dir, StatusCode::kNotFound),
              HasSubstr(dir + "/model-00003-of-00003.safetensors: no such file"));
  index["weight_map"]["model.norm.weight"] = "../model.safetensors";
  WriteFile(dir + "/model.safetensors.index.json", index.dump());
  EXPECT_THAT(ImportError(dir, StatusCode::kInvalidArgument),
              HasSubstr("weight_map entry for model.norm.weight is \"../model.safetensors\""));
  index["weight_map"]["model.norm.weight"] = "model-00002-of-00002.safetensors";
  WriteFile(dir + "/model.safetensors.index.json", index.dump());
  EXPECT_THAT(ImportError(dir, StatusCode::kInvalidArgument),
              HasSubstr("model-00002-of-00002.safetensors lacks model.norm.weight"));
  index["weight_map"].erase("model.norm.weight");
  first.erase("model.norm.weight");
  WriteDir("sharded", ConfigToHfJson(c), first, "model-00001-of-00002.safetensors");
  WriteFile(dir + "/model.safetensors.index.json", index.dump());
  EXPECT_EQ(ImportError(dir, StatusCode::kInvalidArgument),
            dir + "/model.safetensors.index.json lacks model.norm.weight");
}

TEST_F(HfTest, ConfigErrorsNameTheField) {
  const Config c = SmallConfig(true, true);
  const TensorMap tensors = TensorsOf(c, RepresentableParams(c));
  EXPECT_THAT(ImportError(root_ + "/none", StatusCode::kNotFound),
              HasSubstr(root_ + "/none/config.json: no such file"));

  nlohmann::json j = ConfigToHfJson(c);
  j["model_type"] = "mistral";
  std::string dir = WriteDir("mistral", j, tensors);
  EXPECT_THAT(ImportError(dir, StatusCode::kInvalidArgument),
              HasSubstr(dir + "/config.json: config field 'model_type' is \"mistral\""));

  j = ConfigToHfJson(c);
  j["architectures"] = {"LlamaModel"};
  dir = WriteDir("arch", j, tensors);
  EXPECT_THAT(ImportError(dir, StatusCode::kInvalidArgument),
              HasSubstr("field 'architectures' is [\"LlamaModel\"]"));

  j = ConfigToHfJson(c);
  j.erase("model_type");
  dir = WriteDir("notype", j, tensors);
  EXPECT_THAT(ImportError(dir, StatusCode::kInvalidArgument), HasSubstr("'model_type'"));

  j = ConfigToHfJson(c);
  j["head_dim"] = 8;
  dir = WriteDir("headdim", j, tensors);
  EXPECT_THAT(ImportError(dir, StatusCode::kInvalidArgument), HasSubstr("field 'head_dim' = 8"));

  j = ConfigToHfJson(c);
  j["num_key_value_heads"] = 3;
  dir = WriteDir("kv", j, tensors);
  EXPECT_THAT(ImportError(dir, StatusCode::kInvalidArgument), HasSubstr("'n_kv_heads' = 3"));

  dir = WriteDir("badjson", j, tensors);
  WriteFile(dir + "/config.json", "{\"hidden_size\": ");
  EXPECT_EQ(ImportError(dir, StatusCode::kInvalidArgument),
            dir + "/config.json: not a JSON object");

  dir = WriteDir("noweights", ConfigToHfJson(c), tensors);
  fs::remove(dir + "/model.safetensors");
  EXPECT_EQ(ImportError(dir, StatusCode::kNotFound),
            dir + " has neither model.safetensors nor model.safetensors.index.json");
}

TEST_F(HfTest, TensorErrorsNameTheTensor) {
  const Config c = SmallConfig(false, true);
  const TensorMap good = TensorsOf(c, RepresentableParams(c));
  const nlohmann::json j = ConfigToHfJson(c);

  TensorMap t = good;
  t.erase("model.layers.1.mlp.up_proj.weight");
  std::string dir = WriteDir("missing", j, t);
  EXPECT_EQ(ImportError(dir, StatusCode::kInvalidArgument),
            dir + "/model.safetensors lacks model.layers.1.mlp.up_proj.weight");

  t = good;
  t["model.layers.0.self_attn.k_proj.weight"] = {{16, 16}, std::vector<float>(256)};
  dir = WriteDir("shape", j, t);
  EXPECT_EQ(ImportError(dir, StatusCode::kInvalidArgument),
            dir +
                "/model.safetensors: tensor model.layers.0.self_attn.k_proj.weight has shape "
                "[16, 16]; config.json implies [8, 16]");

  t = good;
  t.erase("lm_head.weight");
  dir = WriteDir("nohead", j, t);
  EXPECT_EQ(ImportError(dir, StatusCode::kInvalidArgument),
            dir +
                "/model.safetensors lacks lm_head.weight (config.json has "
                "tie_word_embeddings = false)");

  t = good;
  t["model.layers.0.self_attn.q_proj.bias"] = {{16}, std::vector<float>(16)};
  dir = WriteDir("bias", j, t);
  EXPECT_THAT(ImportError(dir, StatusCode::kInvalidArgument),
              HasSubstr("has model.layers.0.self_attn.q_proj.bias; hpod-train's Llama has no "
                        "biases"));

  t = good;
  t["model.layers.2.input_layernorm.weight"] = {{16}, std::vector<float>(16)};
  dir = WriteDir("layers", j, t);
  EXPECT_THAT(ImportError(dir, StatusCode::kInvalidArgument),
              HasSubstr("has model.layers.2.input_layernorm.weight but config.json says "
                        "num_hidden_layers = 2"));
}

TEST_F(HfTest, UnsupportedDtypeIsNamed) {
  // dim 8 → model.norm.weight is [8]; stored as I64 with that shape.
  Config c = SmallConfig(true, false);
  c.dim = 8;
  c.n_heads = 2;
  c.n_kv_heads = 2;
  TensorMap t = TensorsOf(c, RepresentableParams(c));
  // Our writer only writes floats: write 64 placeholder bytes, then relabel them.
  t["model.norm.weight"] = {{16}, std::vector<float>(16)};
  const std::string dir = WriteDir("i64", ConfigToHfJson(c), t);
  std::string bytes = ReadFile(dir + "/model.safetensors");
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
  header["model.norm.weight"]["dtype"] = "I64";
  header["model.norm.weight"]["shape"] = {8};
  std::string text = header.dump();
  uint64_t len = text.size();
  WriteFile(dir + "/model.safetensors",
            std::string(reinterpret_cast<const char*>(&len), 8) + text + bytes.substr(8 + n));
  EXPECT_EQ(ImportError(dir, StatusCode::kInvalidArgument),
            dir +
                "/model.safetensors: tensor model.norm.weight has dtype I64; hpod-train reads "
                "F32, BF16, F16");
}

TEST_F(HfTest, TiedHeadAndExtraTensors) {
  const Config c = SmallConfig(true, true);
  const nlohmann::json j = ConfigToHfJson(c);
  TensorMap t = TensorsOf(c, RepresentableParams(c));
  t["lm_head.weight"] = t["model.embed_tokens.weight"];  // tied, stored anyway: accepted
  t["model.layers.0.self_attn.rotary_emb.inv_freq"] = {{2}, {1.0f, 0.5f}};  // silently ignored
  t["model.extra_buffer"] = {{1}, {3.0f}};                                  // warned about
  std::string dir = WriteDir("tied", j, t);
  auto m = ImportHf(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_THAT(
      m->warnings,
      ElementsAre(dir + "/model.safetensors: ignoring unexpected tensor model.extra_buffer"));
  EXPECT_EQ(m->params, RepresentableParams(c));

  t["lm_head.weight"].data[5] += 1;
  dir = WriteDir("tied-differs", j, t);
  EXPECT_EQ(ImportError(dir, StatusCode::kInvalidArgument),
            dir +
                "/model.safetensors has an lm_head.weight that differs from "
                "model.embed_tokens.weight, but config.json has tie_word_embeddings = true");
}

TEST_F(HfTest, CorruptWeightsAreDataLoss) {
  const Config c = SmallConfig(true, true);
  std::vector<float> p = RepresentableParams(c);
  const std::string dir = root_ + "/m";
  ASSERT_TRUE(ExportHf(dir, c, p.data(), DType::kBF16, "").ok());
  std::string bytes = ReadFile(dir + "/model.safetensors");
  WriteFile(dir + "/model.safetensors", bytes.substr(0, bytes.size() - 10));
  EXPECT_THAT(ImportError(dir, StatusCode::kDataLoss),
              HasSubstr(dir + "/model.safetensors: tensor model.norm.weight: data_offsets"));
}

}  // namespace
}  // namespace hpod::train::model
