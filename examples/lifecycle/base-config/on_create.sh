#!/bin/bash
# A minimal HyperPod-style OnCreate script. hpod runs it as root on every new node
# with cwd = the downloaded prefix (/tmp/sagemaker-lifecycle-<id>/src) and
# SAGEMAKER_RESOURCE_CONFIG_PATH pointing at /opt/ml/config/resource_config.json,
# exactly as HyperPod does, so the same script works on both.
set -euo pipefail
LOG=/var/log/provision/provisioning.log
mkdir -p "$(dirname "$LOG")"
exec > >(tee -a "$LOG") 2>&1

config=${SAGEMAKER_RESOURCE_CONFIG_PATH:-/opt/ml/config/resource_config.json}
echo "[INFO]: on_create.sh on $(hostname) in $(pwd)"
# Like AWS's base-config, find this node in the resource config by its address.
read -r group name < <(python3 ./utils/whoami.py "$config")
echo "[INFO]: this is $name of instance group $group"

mkdir -p /fsx/hpod-demo
echo "$name $group $(date -u +%FT%TZ)" > "/fsx/hpod-demo/$(hostname)"
echo "[INFO]: Success: All provisioning scripts completed"
