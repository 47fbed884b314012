#!/usr/bin/env bash
# make quickstart: starts hpodd on this machine and shows how to talk to it with
# both clients. What it creates lives in .hpod-quickstart/ (state, logs) and in
# the 'hpod' profile of ~/.aws (credentials of the first admin key).
#
# Today hpodd runs without a node provider (the local namespace provider is the
# next milestone), so clusters are accepted, tracked and reported, but their
# nodes fail to launch with a FailureMessage that says exactly that.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir="$top/.hpod-quickstart"
bin="$top/build/cmd"
port=${HPOD_PORT:-8450}
mkdir -p "$dir"

if [ -f "$dir/hpodd.pid" ] && kill -0 "$(cat "$dir/hpodd.pid")" 2>/dev/null; then
  echo "hpodd is already running (pid $(cat "$dir/hpodd.pid")); stop it with: kill $(cat "$dir/hpodd.pid")"
else
  "$bin/hpodd/hpodd" --data-dir "$dir/data" init --listen "127.0.0.1:$port"
  "$bin/hpodd/hpodd" --data-dir "$dir/data" --listen "127.0.0.1:$port" \
    > "$dir/hpodd.out" 2> "$dir/hpodd.err" &
  echo $! > "$dir/hpodd.pid"
  # Wait (up to 10 s) for the ready line hpodd prints once it serves.
  for _ in $(seq 100); do
    grep -q "ready on" "$dir/hpodd.out" 2>/dev/null && break
    kill -0 "$(cat "$dir/hpodd.pid")" 2>/dev/null || { cat "$dir/hpodd.err"; exit 1; }
    sleep 0.1
  done
  grep "ready on" "$dir/hpodd.out"
fi

echo
echo "--- hpod list-clusters (our CLI, profile 'hpod')"
"$bin/hpod/hpod" --profile hpod list-clusters --output table || true
if command -v aws >/dev/null; then
  echo "--- aws sagemaker list-clusters (the standard AWS CLI, same profile)"
  aws --profile hpod sagemaker list-clusters --endpoint-url "http://127.0.0.1:$port" || true
fi
cat <<EOT

hpodd is running (pid $(cat "$dir/hpodd.pid")), state in $dir/data, log in $dir/data/hpodd.log.
Talk to it:
  $bin/hpod/hpod --profile hpod create-cluster --cluster-name demo \\
      --instance-groups file://$top/examples/demo-cluster.json
  $bin/hpod/hpod --profile hpod describe-cluster --cluster-name demo
  $bin/hpod/hpod --profile hpod list-cluster-events --cluster-name demo --output table
  aws --profile hpod --endpoint-url http://127.0.0.1:$port sagemaker describe-cluster --cluster-name demo
Stop it:
  kill $(cat "$dir/hpodd.pid")
EOT
