// `hpod-train --dry-run`: what a run would do and need, before it allocates
// anything: parameters by component, FLOPs per token and per step, memory,
// data, schedule and checkpoints.
//
// Thread contract: pure function.
#pragma once

#include <string>

#include "hpod/train/model/config.h"
#include "hpod/train/trainer/options.h"

namespace hpod::train {

// Bytes of activations the backward pass keeps for one micro-batch (an
// upper estimate of the model's buffers: per layer the normed inputs, q/k/v,
// attention probabilities, attention output, the three MLP buffers, and the
// logits once).
int64_t EstimateActivationBytes(const model::Config& c, int64_t batch, int64_t seq_len);

// `world`: ranks of a distributed run (memory per rank, the global batch).
std::string FormatPlan(const TrainOptions& o, const model::Config& c, int world = 1);

}  // namespace hpod::train
