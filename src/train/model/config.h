// The Llama model configuration and the layout of its parameters.
//
// Field names follow Hugging Face's LlamaConfig so a config.json from a HF
// directory and hpod's own train.json read the same. The parameter layout is
// the one contract shared by the model, its checkpoints and HF import/export:
// one flat fp32 arena, tensors in ParamSpecs() order, each named as in HF.
//
// Thread contract: plain values; functions are pure.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/base/status.h"

namespace hpod::train::model {

struct Config {
  int64_t dim = 288;            // hidden_size
  int64_t n_layers = 6;         // num_hidden_layers
  int64_t n_heads = 6;          // num_attention_heads
  int64_t n_kv_heads = 6;       // num_key_value_heads (grouped-query when < n_heads)
  int64_t vocab_size = 4096;    // vocab_size
  int64_t hidden_dim = 768;     // intermediate_size (SwiGLU)
  double rope_theta = 10000.0;  // rope_theta
  double norm_eps = 1e-5;       // rms_norm_eps
  int64_t max_seq_len = 256;    // max_position_embeddings
  bool tied_embeddings = true;  // tie_word_embeddings

  int64_t head_dim() const { return dim / n_heads; }
  int64_t kv_dim() const { return n_kv_heads * head_dim(); }
};

// Accepts both hpod's short names (dim, n_layers, …) and HF's LlamaConfig names
// (hidden_size, num_hidden_layers, …); unknown keys are ignored, so a whole
// HF config.json can be passed. An error names the offending field in one line.
StatusOr<Config> ConfigFromJson(const nlohmann::json& j);
// Checks ranges and divisibility; the message names the field.
Status ValidateConfig(const Config& c);
// HF config.json for a LlamaForCausalLM with this shape.
nlohmann::json ConfigToHfJson(const Config& c);
// hpod's short form (what checkpoints record).
nlohmann::json ConfigToJson(const Config& c);

struct ParamSpec {
  std::string name;            // HF name, e.g. "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // row-major; Linear weights are [out, in] as in PyTorch
  int64_t offset = 0;          // in floats from the start of the arena
  int64_t numel = 0;
};

// Every parameter in arena order: embed_tokens, then per layer
// input_layernorm, q_proj, k_proj, v_proj, o_proj, post_attention_layernorm,
// gate_proj (w1), up_proj (w3), down_proj (w2); then model.norm, then lm_head
// when untied. Offsets are contiguous.
std::vector<ParamSpec> ParamSpecs(const Config& c);
int64_t NumParams(const Config& c);

// Forward+backward FLOPs per token at sequence length `seq_len`:
// 6 * (matmul parameters, incl. the classifier) + 6 * n_layers * seq_len * dim
// (attention scores and values, causal half counted as in PaLM's appendix B
// would be 6*L*T*d/2; we count the full square, as llm.c and the PyTorch peer
// figures do).
double FlopsPerToken(const Config& c, int64_t seq_len);

}  // namespace hpod::train::model
