// Hugging Face Llama directories: import into hpod's parameter arena, export
// from it.
//
// A directory holds config.json (LlamaConfig), the weights as model.safetensors
// or as shards model-0000i-of-0000n.safetensors listed in
// model.safetensors.index.json, and optionally tokenizer.model. Tensor names and
// shapes are ParamSpecs()'s; hpod uses HF's RoPE convention, so q/k load as they
// are (no permutation).
//
// Thread contract: free functions without shared state; concurrent calls on
// distinct directories are safe.
#pragma once

#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/train/model/config.h"
#include "hpod/train/model/safetensors.h"

namespace hpod::train::model {

struct HfModel {
  Config config;
  std::vector<float> params;          // NumParams(config) floats, ParamSpecs(config) layout
  std::vector<std::string> warnings;  // one line each, e.g. ignored extra tensors
};

// Reads `dir`. Every error is one line naming the file and the field or tensor:
//  - NotFoundError: no config.json; neither model.safetensors nor
//    model.safetensors.index.json; a shard the index names is missing.
//  - InvalidArgumentError: config.json is not JSON, not a LlamaForCausalLM
//    (model_type, architectures, hidden_act, rope_scaling, biases, head_dim) or
//    out of range; a tensor is missing ("model.safetensors lacks
//    model.layers.3.mlp.up_proj.weight"), has another shape (name, expected,
//    got) or a dtype other than F32/BF16/F16; a bias or a layer beyond
//    num_hidden_layers is present; tie_word_embeddings is false and lm_head.weight
//    is absent, or it is true and lm_head.weight differs from embed_tokens.
//  - DataLossError: a corrupt safetensors file (see SafetensorsFile::Open).
// Tolerated: rotary_emb.inv_freq buffers (silently); lm_head.weight equal to
// the embedding in a tied model; other unknown tensors (listed in warnings).
StatusOr<HfModel> ImportHf(const std::string& dir);

// Writes `dir` as a whole: config.json (ConfigToHfJson with torch_dtype set to
// `dtype`), model.safetensors ({"format": "pt"} metadata, tensors in
// ParamSpecs(c) order converted to `dtype`) and, when `tokenizer_model` (a
// path) is non-empty, a copy of it as tokenizer.model. Built in a sibling
// temporary directory, fsynced, then renamed into place; an existing `dir` is
// replaced atomically (exchanged, then removed), so readers see the old or the
// new directory, never a mix. `params` holds NumParams(c) floats.
Status ExportHf(const std::string& dir, const Config& c, const float* params, DType dtype,
                const std::string& tokenizer_model);

}  // namespace hpod::train::model
