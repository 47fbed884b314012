// The state of one training run and the pieces of it that trainer.cc (the
// loop) and resume.cc (where a run continues from) share. Internal to the
// trainer library; not an API.
//
// Distributed runs are data parallel with a ZeRO-1 optimizer: every rank
// holds the whole model (parameters and gradients) and trains on its own
// slice of every global batch; the flat gradient arena is reduce-scattered so
// rank r holds the summed gradients of its shard [shard_begin, +shard_count),
// updates that slice of the parameters with the AdamW moments only it keeps,
// and the parameters are allgathered back. One process is the same code with
// a world of one (every collective a no-op), and computes bit for bit what it
// computed before distributed training existed.
//
// Thread contract: owned by the training thread.
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hpod/base/status.h"
#include "hpod/train/ckpt/checkpoint.h"
#include "hpod/train/comm/rendezvous.h"
#include "hpod/train/data/loader.h"
#include "hpod/train/model/llama.h"
#include "hpod/train/model/optim.h"
#include "hpod/train/trainer/goodput_writer.h"
#include "hpod/train/trainer/options.h"
#include "hpod/train/trainer/summary.h"
#include "hpod/train/trainer/tfevents.h"

namespace hpod::train {

struct Run {
  model::Config config;
  std::unique_ptr<data::TokenSource> source;
  std::string tokenizer_id;
  comm::JoinedWorld world;            // world.comm is set for every world size
  std::vector<int64_t> shard_counts;  // ZeRO-1 slices of the arena, by rank
  int64_t shard_begin = 0;
  int64_t shard_count = 0;
  std::unique_ptr<model::Llama> model;
  std::unique_ptr<model::AdamW> adam;            // this rank's shard of the moments
  std::unique_ptr<comm::Store> ckpt_store;       // the writer thread's own connection
  std::unique_ptr<ckpt::PartExchange> exchange;  // over ckpt_store, or local
  std::unique_ptr<ckpt::AsyncCheckpointer> checkpointer;
  std::unique_ptr<EventWriter> events;
  // Rank 0's goodput ledger; null on other ranks and when there is none.
  std::unique_ptr<GoodputWriter> goodput;
  int64_t step = 0;              // optimizer steps done
  int64_t consumed_samples = 0;  // samples consumed by those steps (all ranks)
  std::vector<model::ParamSpec> specs;

  int rank() const { return world.world.rank; }
  int world_size() const { return world.world.size; }
  // Rank 0 writes what a user reads: the progress line, TensorBoard, metrics,
  // the summary, the goodput ledger, HF exports; it alone prunes and sets checkpoints aside.
  bool lead() const { return world.world.rank == 0; }
};

// Prints a warning (rank 0 only: every rank would print the same) and
// records it in the summary.
using Warn = std::function<void(std::string)>;

// What decides each step's update besides the checkpointed state; a resume
// that changes any of it warns. samples_per_step is the global batch.
nlohmann::json ScheduleJson(const TrainOptions& o, int world_size);
// The `meta` of every checkpoint of this run at its current step.
nlohmann::json CheckpointMeta(const TrainOptions& o, const Run& r, float loss);
// This rank's part of a checkpoint: its slices of the parameters and moments.
std::vector<ckpt::TensorView> CheckpointTensors(Run& r);
// What every rank of a run must agree on at the rendezvous.
nlohmann::json AgreeJson(const TrainOptions& o, const Run& r);
// The part reports of sharded checkpoints, over the run's store. Collect gives
// up as soon as CheckpointAbortKey is set (a rank failed).
std::string CheckpointAbortKey(const std::string& prefix);
std::unique_ptr<ckpt::PartExchange> MakeStorePartExchange(comm::Store& store, std::string prefix);

struct Resumed {
  bool resumed = false;
  float last_loss = 0;
  LoadRecord load;
};

// Finds the newest checkpoint in o.checkpoint_dir that every rank verifies,
// loads it (all parameters, this rank's moments, whatever world size wrote
// it) and sets step and consumed_samples. Newer ones that failed are skipped
// with a warning naming the rank and why, and set aside by rank 0. Fresh
// start (resumed = false) when there is none; errors when checkpoints exist
// but none verifies, or when they belong to another run (model, data, seed).
StatusOr<Resumed> Resume(const TrainOptions& o, Run& r, const Warn& warn, std::FILE* err);

}  // namespace hpod::train
