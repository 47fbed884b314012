#include "hpod/train/model/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace hpod::train::model {
namespace {

using ::testing::HasSubstr;

TEST(ConfigTest, Llama2c15MShape) {
  Config c;                                     // defaults are llama2.c's 15M shape
  EXPECT_EQ(NumParams(c), 7151616 + 288 * 13);  // matmuls + 13 norm vectors
  // training-building-blocks.md §8: ≈ 45.6 MFLOP/token at seq 256.
  EXPECT_NEAR(FlopsPerToken(c, 256) / 1e6, 45.6, 0.1);
}

TEST(ConfigTest, ReadsHfNamesAndGqa) {
  auto j = nlohmann::json::parse(R"({
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
    "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 512, "intermediate_size": 176,
    "rope_theta": 500000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 128,
    "tie_word_embeddings": false, "rope_scaling": null})");
  auto c = ConfigFromJson(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->dim, 64);
  EXPECT_EQ(c->n_kv_heads, 2);
  EXPECT_EQ(c->kv_dim(), 32);
  EXPECT_FALSE(c->tied_embeddings);
  auto specs = ParamSpecs(*c);
  EXPECT_EQ(specs.front().name, "model.embed_tokens.weight");
  EXPECT_EQ(specs.back().name, "lm_head.weight");
  EXPECT_EQ(specs[3].name, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(specs[3].shape, (std::vector<int64_t>{32, 64}));
  // Round trip through HF's form.
  auto back = ConfigFromJson(ConfigToHfJson(*c));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(ConfigToJson(*back), ConfigToJson(*c));
  auto own = ConfigFromJson(ConfigToJson(*c));
  ASSERT_TRUE(own.ok());
  EXPECT_EQ(ConfigToJson(*own), ConfigToJson(*c));
}

TEST(ConfigTest, ErrorsNameTheField) {
  auto err = [](const char* text) {
    auto c = ConfigFromJson(nlohmann::json::parse(text));
    EXPECT_FALSE(c.ok()) << text;
    return c.ok() ? std::string() : c.status().message();
  };
  EXPECT_THAT(err(R"({"dim": 100, "n_heads": 3})"), HasSubstr("'n_heads'"));
  EXPECT_THAT(err(R"({"n_heads": 6, "n_kv_heads": 4})"), HasSubstr("'n_kv_heads'"));
  EXPECT_THAT(err(R"({"dim": "big"})"), HasSubstr("'dim'"));
  EXPECT_THAT(err(R"({"n_layers": 0})"), HasSubstr("'n_layers'"));
  EXPECT_THAT(err(R"({"model_type": "mistral"})"), HasSubstr("'model_type'"));
  EXPECT_THAT(err(R"({"model_type": "llama", "rope_scaling": {"type": "linear"}})"),
              HasSubstr("'rope_scaling'"));
  EXPECT_THAT(err(R"({"norm_eps": -1})"), HasSubstr("'norm_eps'"));
  EXPECT_THAT(err(R"([1])"), HasSubstr("JSON object"));
}

}  // namespace
}  // namespace hpod::train::model
