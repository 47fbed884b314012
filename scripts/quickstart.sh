#!/usr/bin/env bash
# make quickstart: the main job on one machine. Starts hpodd (as root: its local
# provider runs every node as Linux namespaces), creates the demo cluster (one
# controller, four workers) whose HyperPod-style lifecycle scripts come from
# examples/lifecycle/base-config, waits until it is InService, runs a command on
# the controller through `hpod start-session`, and shows what to do next.
#
# State and logs live in .hpod-quickstart/; the 'hpod' profile in ~/.aws holds the
# first admin key. Node addresses come from 10.77.0.0/16 (override with
# HPOD_NODE_BLOCK), which the host guards with an unreachable route first, so no
# node packet can leave this machine.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
dir="$top/.hpod-quickstart"
bin="$top/build/cmd"
port=${HPOD_PORT:-8450}
block=${HPOD_NODE_BLOCK:-10.77.0.0/16}
hpod=("$bin/hpod/hpod" --profile hpod --endpoint-url "http://127.0.0.1:$port")
mkdir -p "$dir"

if [ "$(id -u)" -ne 0 ]; then
  echo "quickstart: hpodd's local provider creates network namespaces and mounts; run as root" >&2
  exit 1
fi
case "$top" in
  /tmp/*|/run/*)
    echo "quickstart: nodes have their own /tmp and /run; clone hpod elsewhere (e.g. ~/hpod)" >&2
    exit 1 ;;
esac

if [ -f "$dir/hpodd.pid" ] && kill -0 "$(cat "$dir/hpodd.pid")" 2>/dev/null; then
  echo "hpodd is already running (pid $(cat "$dir/hpodd.pid"))"
else
  "$bin/hpodd/hpodd" --data-dir "$dir/data" init --listen "127.0.0.1:$port"
  "$bin/hpodd/hpodd" --data-dir "$dir/data" --listen "127.0.0.1:$port" --node-block "$block" \
    > "$dir/hpodd.out" 2> "$dir/hpodd.err" &
  echo $! > "$dir/hpodd.pid"
  for _ in $(seq 100); do
    grep -q "ready on" "$dir/hpodd.out" 2>/dev/null && break
    kill -0 "$(cat "$dir/hpodd.pid")" 2>/dev/null || { cat "$dir/hpodd.err"; exit 1; }
    sleep 0.1
  done
  grep "ready on" "$dir/hpodd.out"
fi

# The demo cluster with lifecycle scripts from this checkout (file://); on AWS the
# same JSON names an s3:// prefix.
lcs="$top/examples/lifecycle/base-config/"
sed "s#s3://sagemaker-lifecycle-demo/LifecycleScripts/base-config/#file://$lcs#" \
  "$top/examples/demo-cluster.json" > "$dir/demo-cluster.json"
if ! "${hpod[@]}" describe-cluster --cluster-name demo >/dev/null 2>&1; then
  echo
  echo "--- hpod create-cluster --cluster-name demo --instance-groups file://$dir/demo-cluster.json"
  "${hpod[@]}" create-cluster --cluster-name demo --instance-groups "file://$dir/demo-cluster.json"
fi
echo "--- hpod wait cluster-in-service --cluster-name demo"
"${hpod[@]}" wait cluster-in-service --cluster-name demo --timeout 600
"${hpod[@]}" list-cluster-nodes --cluster-name demo --output table --query \
  'ClusterNodeSummaries[].[InstanceGroupName,InstanceId,PrivateDnsHostname,InstanceStatus.Status]'

cid=$("${hpod[@]}" describe-cluster --cluster-name demo --query ClusterArn --output text)
cid=${cid##*/}
ctl=$("${hpod[@]}" list-cluster-nodes --cluster-name demo --instance-group-name-contains controller \
        --query 'ClusterNodeSummaries[0].InstanceId' --output text)
target="sagemaker-cluster:${cid}_controller-machine-${ctl}"
cmd='hostname; sinfo; srun -N4 hostname | sort'
echo "--- hpod start-session --target $target --command '$cmd'"
"${hpod[@]}" start-session --target "$target" --command "$cmd"

cat <<EOT

The demo cluster is InService: 5 nodes, each with its own network, hostname, mounts
and processes, sharing /fsx, with Slurm (slurmctld on the controller, slurmd on the
four workers). hpodd (pid $(cat "$dir/hpodd.pid")) logs to $dir/data/hpodd.log.

  ${hpod[*]} start-session --target $target      # a root shell on the controller: sinfo, sbatch, squeue
  ${hpod[*]} list-cluster-nodes --cluster-name demo --with-slurm --output table
  ${hpod[*]} logs --cluster-name demo --node-id $ctl     # its lifecycle script output
  ${hpod[*]} list-cluster-events --cluster-name demo --output table
  aws --profile hpod --endpoint-url http://127.0.0.1:$port sagemaker describe-cluster --cluster-name demo

The console: http://127.0.0.1:$port/ (sign in with the access key and secret of the [hpod]
profile in ~/.aws/credentials). Prometheus metrics: GET http://127.0.0.1:$port/metrics with
"Authorization: Bearer \$(cat $dir/data/metrics-token)" (examples/observability/).

  ${hpod[*]} delete-cluster --cluster-name demo  # removes every node
  kill \$(cat $dir/hpodd.pid)                              # stops hpodd (nodes keep running)
EOT
