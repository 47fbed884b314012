#!/usr/bin/env bash
# Builds the real training data of hpod-train from Debian packages (nothing is
# downloaded): the KJV (bible-kjv) and Jane Austen's novels (r-cran-janeaustenr,
# optional), one document per line, then for each vocabulary size a
# SentencePiece BPE tokenizer and train/validation token shards.
#
#   scripts/corpus.sh [--vocab N]... [--force] [OUT_DIR]   (default OUT_DIR: $BUILD/data)
#
# OUT_DIR/text/{kjv,austen}.txt, OUT_DIR/tok<N>.{model,vocab},
# OUT_DIR/train<N>.bin, OUT_DIR/val<N>.bin (1 % of documents); default vocabs
# 4096 (the llama2.c "15M" shape) and 512 (the CI-sized model). Steps whose
# output exists are skipped unless --force. The packages: scripts/install-deps.sh --corpus.
# hpod-data is taken from $HPOD_DATA, else $BUILD (default build)/cmd/hpod-data/.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
hpod_data="${HPOD_DATA:-$root/${BUILD:-build}/cmd/hpod-data/hpod-data}"
out="$root/${BUILD:-build}/data"  # a build product: build/ is git-ignored
vocabs=()
force=0
while [ $# -gt 0 ]; do
  case "$1" in
    --vocab) vocabs+=("$2"); shift 2 ;;
    --force) force=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) echo "corpus.sh: unknown option $1 (see --help)" >&2; exit 1 ;;
    *) out="$1"; shift ;;
  esac
done
[ ${#vocabs[@]} -gt 0 ] || vocabs=(4096 512)
if [ ! -x "$hpod_data" ]; then
  echo "corpus.sh: $hpod_data not found: run make (or set HPOD_DATA=/path/to/hpod-data)" >&2
  exit 1
fi

mkdir -p "$out"
if [ $force = 1 ] || [ ! -s "$out/text/kjv.txt" ]; then
  "$hpod_data" corpus --output "$out/text"
fi
inputs=(--input "$out/text/kjv.txt")
[ -s "$out/text/austen.txt" ] && inputs+=(--input "$out/text/austen.txt")

for v in "${vocabs[@]}"; do
  if [ $force = 1 ] || [ ! -s "$out/tok$v.model" ]; then
    "$hpod_data" train-tokenizer "${inputs[@]}" --vocab-size "$v" --output "$out/tok$v"
  fi
  if [ $force = 1 ] || [ ! -s "$out/train$v.bin" ] || [ "$out/tok$v.model" -nt "$out/train$v.bin" ]; then
    "$hpod_data" tokenize --tokenizer "$out/tok$v.model" "${inputs[@]}" \
      --output "$out/train$v.bin" --val-output "$out/val$v.bin" --val-fraction 0.01
  fi
  "$hpod_data" info "$out/train$v.bin"
done
