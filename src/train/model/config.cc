#include "hpod/train/model/config.h"

#include <string_view>

#include "fmt/format.h"

namespace hpod::train::model {
namespace {

// Reads an integer field under either of its names; `found` tells whether any was set.
Status ReadInt(const nlohmann::json& j, std::string_view short_name, std::string_view hf_name,
               int64_t* out) {
  for (std::string_view name : {short_name, hf_name}) {
    auto it = j.find(std::string(name));
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number_integer() &&
        !(it->is_number_float() && it->get<double>() == static_cast<int64_t>(it->get<double>()))) {
      return InvalidArgumentError(
          fmt::format("config field '{}' must be an integer, got {}", name, it->dump()));
    }
    *out = it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(it->get<double>());
    return OkStatus();
  }
  return OkStatus();
}

Status ReadDouble(const nlohmann::json& j, std::string_view short_name, std::string_view hf_name,
                  double* out) {
  for (std::string_view name : {short_name, hf_name}) {
    auto it = j.find(std::string(name));
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number()) {
      return InvalidArgumentError(
          fmt::format("config field '{}' must be a number, got {}", name, it->dump()));
    }
    *out = it->get<double>();
    return OkStatus();
  }
  return OkStatus();
}

}  // namespace

StatusOr<Config> ConfigFromJson(const nlohmann::json& j) {
  if (!j.is_object()) {
    return InvalidArgumentError("model config must be a JSON object");
  }
  Config c;
  bool hf = j.contains("hidden_size") || j.contains("model_type");
  if (hf) {
    // HF defaults differ from the 15M shape; a HF config names its own fields,
    // and a missing num_key_value_heads means plain multi-head attention.
    c.tied_embeddings = false;
  }
  if (auto it = j.find("model_type"); it != j.end()) {
    if (!it->is_string() || it->get<std::string>() != "llama") {
      return InvalidArgumentError(fmt::format(
          "config field 'model_type' is {}; hpod-train supports only \"llama\"", it->dump()));
    }
  }
  if (auto it = j.find("hidden_act"); it != j.end()) {
    if (!it->is_string() || it->get<std::string>() != "silu") {
      return InvalidArgumentError(fmt::format(
          "config field 'hidden_act' is {}; Llama's SwiGLU needs \"silu\"", it->dump()));
    }
  }
  for (const char* unsupported : {"rope_scaling", "attention_bias", "mlp_bias"}) {
    auto it = j.find(unsupported);
    if (it == j.end() || it->is_null() || (it->is_boolean() && !it->get<bool>())) continue;
    return InvalidArgumentError(fmt::format("config field '{}' = {} is not supported by hpod-train",
                                            unsupported, it->dump()));
  }
  HPOD_RETURN_IF_ERROR(ReadInt(j, "dim", "hidden_size", &c.dim));
  HPOD_RETURN_IF_ERROR(ReadInt(j, "n_layers", "num_hidden_layers", &c.n_layers));
  HPOD_RETURN_IF_ERROR(ReadInt(j, "n_heads", "num_attention_heads", &c.n_heads));
  c.n_kv_heads = c.n_heads;
  HPOD_RETURN_IF_ERROR(ReadInt(j, "n_kv_heads", "num_key_value_heads", &c.n_kv_heads));
  HPOD_RETURN_IF_ERROR(ReadInt(j, "vocab_size", "vocab_size", &c.vocab_size));
  HPOD_RETURN_IF_ERROR(ReadInt(j, "hidden_dim", "intermediate_size", &c.hidden_dim));
  HPOD_RETURN_IF_ERROR(ReadDouble(j, "rope_theta", "rope_theta", &c.rope_theta));
  HPOD_RETURN_IF_ERROR(ReadDouble(j, "norm_eps", "rms_norm_eps", &c.norm_eps));
  HPOD_RETURN_IF_ERROR(ReadInt(j, "max_seq_len", "max_position_embeddings", &c.max_seq_len));
  for (const char* name : {"tied_embeddings", "tie_word_embeddings"}) {
    auto it = j.find(name);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_boolean()) {
      return InvalidArgumentError(
          fmt::format("config field '{}' must be true or false, got {}", name, it->dump()));
    }
    c.tied_embeddings = it->get<bool>();
  }
  HPOD_RETURN_IF_ERROR(ValidateConfig(c));
  return c;
}

Status ValidateConfig(const Config& c) {
  auto positive = [](const char* name, int64_t v, int64_t max) -> Status {
    if (v <= 0 || v > max) {
      return InvalidArgumentError(
          fmt::format("config field '{}' = {} must be in 1..{}", name, v, max));
    }
    return OkStatus();
  };
  HPOD_RETURN_IF_ERROR(positive("dim", c.dim, 1 << 16));
  HPOD_RETURN_IF_ERROR(positive("n_layers", c.n_layers, 1024));
  HPOD_RETURN_IF_ERROR(positive("n_heads", c.n_heads, 1024));
  HPOD_RETURN_IF_ERROR(positive("n_kv_heads", c.n_kv_heads, 1024));
  HPOD_RETURN_IF_ERROR(positive("vocab_size", c.vocab_size, 1 << 22));
  HPOD_RETURN_IF_ERROR(positive("hidden_dim", c.hidden_dim, 1 << 18));
  HPOD_RETURN_IF_ERROR(positive("max_seq_len", c.max_seq_len, 1 << 20));
  if (c.dim % c.n_heads != 0) {
    return InvalidArgumentError(
        fmt::format("config field 'n_heads' = {} must divide dim = {}", c.n_heads, c.dim));
  }
  if (c.head_dim() % 2 != 0) {
    return InvalidArgumentError(fmt::format(
        "config field 'n_heads' = {} gives head_dim {}; rotary embeddings need an even head_dim",
        c.n_heads, c.head_dim()));
  }
  if (c.n_kv_heads > c.n_heads || c.n_heads % c.n_kv_heads != 0) {
    return InvalidArgumentError(fmt::format(
        "config field 'n_kv_heads' = {} must divide n_heads = {}", c.n_kv_heads, c.n_heads));
  }
  if (!(c.rope_theta > 0)) {
    return InvalidArgumentError(
        fmt::format("config field 'rope_theta' = {} must be positive", c.rope_theta));
  }
  if (!(c.norm_eps > 0 && c.norm_eps < 1)) {
    return InvalidArgumentError(
        fmt::format("config field 'norm_eps' = {} must be in (0, 1)", c.norm_eps));
  }
  return OkStatus();
}

nlohmann::json ConfigToHfJson(const Config& c) {
  return nlohmann::json{
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_act", "silu"},
      {"hidden_size", c.dim},
      {"num_hidden_layers", c.n_layers},
      {"num_attention_heads", c.n_heads},
      {"num_key_value_heads", c.n_kv_heads},
      {"vocab_size", c.vocab_size},
      {"intermediate_size", c.hidden_dim},
      {"rope_theta", c.rope_theta},
      {"rms_norm_eps", c.norm_eps},
      {"max_position_embeddings", c.max_seq_len},
      {"tie_word_embeddings", c.tied_embeddings},
      {"attention_bias", false},
      {"torch_dtype", "float32"},
  };
}

nlohmann::json ConfigToJson(const Config& c) {
  return nlohmann::json{
      {"dim", c.dim},
      {"n_layers", c.n_layers},
      {"n_heads", c.n_heads},
      {"n_kv_heads", c.n_kv_heads},
      {"vocab_size", c.vocab_size},
      {"hidden_dim", c.hidden_dim},
      {"rope_theta", c.rope_theta},
      {"norm_eps", c.norm_eps},
      {"max_seq_len", c.max_seq_len},
      {"tied_embeddings", c.tied_embeddings},
  };
}

std::vector<ParamSpec> ParamSpecs(const Config& c) {
  std::vector<ParamSpec> specs;
  int64_t offset = 0;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    specs.push_back(ParamSpec{std::move(name), std::move(shape), offset, n});
    offset += n;
  };
  const int64_t q_dim = c.n_heads * c.head_dim();
  add("model.embed_tokens.weight", {c.vocab_size, c.dim});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    std::string p = fmt::format("model.layers.{}.", l);
    add(p + "input_layernorm.weight", {c.dim});
    add(p + "self_attn.q_proj.weight", {q_dim, c.dim});
    add(p + "self_attn.k_proj.weight", {c.kv_dim(), c.dim});
    add(p + "self_attn.v_proj.weight", {c.kv_dim(), c.dim});
    add(p + "self_attn.o_proj.weight", {c.dim, q_dim});
    add(p + "post_attention_layernorm.weight", {c.dim});
    add(p + "mlp.gate_proj.weight", {c.hidden_dim, c.dim});
    add(p + "mlp.up_proj.weight", {c.hidden_dim, c.dim});
    add(p + "mlp.down_proj.weight", {c.dim, c.hidden_dim});
  }
  add("model.norm.weight", {c.dim});
  if (!c.tied_embeddings) add("lm_head.weight", {c.vocab_size, c.dim});
  return specs;
}

int64_t NumParams(const Config& c) {
  auto specs = ParamSpecs(c);
  return specs.back().offset + specs.back().numel;
}

double FlopsPerToken(const Config& c, int64_t seq_len) {
  const double q_dim = static_cast<double>(c.n_heads * c.head_dim());
  const double per_layer =
      c.dim * q_dim * 2 + c.dim * c.kv_dim() * 2.0 + 3.0 * c.dim * c.hidden_dim;
  const double matmul_params = per_layer * c.n_layers + static_cast<double>(c.vocab_size) * c.dim;
  return 6.0 * matmul_params + 6.0 * c.n_layers * seq_len * c.dim;
}

}  // namespace hpod::train::model
