#!/bin/bash
# One rank of a tiny Llama (hpod-train's "ci" shape, 0.14M parameters) trained
# data parallel across the job's nodes, the optimizer state sharded; run.slurm
# starts one per node:
#
#   sbatch --nodes 3 --auto-resume=1 run.slurm ./llama_tiny.sh
#
# The same command line on the first run and on every retry (--auto-resume
# re-runs it after hpod replaced a failed node): a start resumes from the newest
# complete checkpoint in $RUN_DIR/checkpoints. rank 0 appends to a goodput
# ledger ($HPOD_GOODPUT_FILE, which the auto-resume supervisor sets per job, else
# $RUN_DIR/checkpoints/goodput.jsonl).
#
# Prepare the data once, on the controller (hpod start-session --target ...):
#   hpod-data train-tokenizer --vocab-size 512 --input corpus.txt --output /fsx/data/tok512
#   hpod-data tokenize --tokenizer /fsx/data/tok512.model --input corpus.txt \
#       --output /fsx/data/train512.bin
# Settings (environment): HPOD_TRAIN (default: hpod-train on PATH), DATA_DIR
# (/fsx/data), RUN_DIR (/fsx/runs/llama_tiny), MAX_STEPS (200); arguments are
# passed on to hpod-train (flags given twice: the last wins).
set -euo pipefail
: "${HPOD_TRAIN:=hpod-train}"
: "${DATA_DIR:=/fsx/data}"
: "${RUN_DIR:=/fsx/runs/llama_tiny}"
: "${MAX_STEPS:=200}"
exec "$HPOD_TRAIN" \
  --model ci --tokenizer "$DATA_DIR/tok512.model" --data "$DATA_DIR/train512.bin" \
  --seq-len 64 --batch-size 8 --seed 1337 --lr 3e-3 --warmup-steps 10 \
  --max-steps "$MAX_STEPS" --threads 1 \
  --checkpoint-dir "$RUN_DIR/checkpoints" --save-interval 20 --keep-last 3 \
  --tensorboard-dir "$RUN_DIR/tensorboard" --summary-json "$RUN_DIR/summary.json" \
  --progress lines --log-interval 10 "$@"
