#!/usr/bin/env bash
# Installs every Debian package hpod needs to build and test. Idempotent: when all
# packages are present it does nothing (no apt-get update, no network).
# Only Debian's archive is used; nothing is downloaded from anywhere else.
#   --corpus  also Jane Austen's novels (r-cran-janeaustenr, pulls R) for
#             `hpod-data corpus`; the KJV is always installed
#   --bench   also the peers the benchmarks measure against (PyTorch 1.13)
set -euo pipefail

EXTRA_PKGS=()
for arg in "$@"; do
  case "$arg" in
    --corpus) EXTRA_PKGS+=(r-cran-janeaustenr) ;;
    --bench) EXTRA_PKGS+=(python3-torch r-cran-janeaustenr) ;;
    *) echo "install-deps: unknown option $arg (use --corpus or --bench)" >&2; exit 2 ;;
  esac
done

# Build-time libraries.
BUILD_PKGS=(
  build-essential cmake pkg-config git
  libboost1.74-dev          # Beast/Asio: the daemon's HTTP server
  libcurl4-openssl-dev      # HTTP client (CLI, agent, S3)
  libssl-dev                # SHA-256/HMAC for SigV4
  nlohmann-json3-dev        # JSON
  libcli11-dev              # command-line parsing
  libspdlog-dev libfmt-dev  # logging, formatting (g++ 12 has no <format>)
  libsqlite3-dev            # the state store
  prometheus-cpp-dev        # GET /metrics: registry, histograms, text format (core only)
  libpcre2-dev              # botocore model patterns use \p{L} classes that std::regex lacks
  libgtest-dev libgmock-dev # unit tests
  # hpod-train / hpod-data (training-building-blocks.md §2, §10, §12)
  libopenblas-dev libdnnl-dev libsentencepiece-dev libxxhash-dev
  libgloo-dev               # collectives for distributed hpod-train (CPU)
  lld                       # links the ~50 binaries ~4x faster than ld.bfd (CMakeLists.txt)
)
# The web console (web/) is built with node and npm (packages from the npm
# registry, pinned by web/package-lock.json). An image's own nodejs (nodesource's
# bundles npm and conflicts with Debian's npm package) is kept: Debian's are
# added only where there is no npm at all.
if ! command -v npm >/dev/null 2>&1; then
  BUILD_PKGS+=(nodejs npm)
fi
# Test-time tools.
TEST_PKGS=(
  clang libclang-rt-14-dev  # libFuzzer targets
  curl                      # raw HTTP probes in e2e tests
  python3                   # Debian's python for helpers that must not need pyenv
  iproute2 util-linux       # local provider: ip netns/link/route, nsenter, unshare
  tmux                      # drives `hpod start-session` through a real PTY in e2e tests
  swift swift-proxy swift-account swift-container swift-object  # S3 server (s3api) for lifecycle tests
  bible-kjv                 # the real corpus the training e2e test learns from
  python3-numpy python3-tqdm python3-protobuf python3-crc32c protobuf-compiler  # oracles for safetensors, the progress line, tfevents
  faketime                  # libfaketime: nodes with skewed clocks (hpodd --fake-clock-skew) in e2e tests
  prometheus                # promtool checks /metrics and prometheus.yml; a real server scrapes hpodd
  chromium fonts-dejavu-core  # the console's browser e2e test (playwright-core drives it; no browser download)
  dpkg-dev lintian xz-utils   # make package: cpack's dpkg-shlibdeps, the packages' lint (scripts/check-packages.sh)
  sshfs openssh-sftp-server   # the pool rig's storage host serves /fsx over sftp (no sshd runs)
  docker-registry mmdebstrap  # containers e2e: a real registry, an image built from Debian packages
  apache2-utils               # htpasswd: the containers e2e's registry that wants a login
)
# Run-time: the Slurm every cluster gets (nodes run Debian's daemons as they are).
# libslurm-dev is for the SPANK plugin. --no-install-recommends (below) matters:
# without it libslurm-dev drags in ~32 packages (hdf5, rrd, ipmi, rocm-smi…).
RUN_PKGS=(
  slurmctld slurmd slurm-client munge libslurm-dev
  squashfs-tools skopeo umoci # hpod-container: .sqsh images, registry pulls, OCI layers (src/container)
  stress-ng iperf3            # deep health checks on every node (hpod-deep-check; docs/node-health.md)
  sudo                        # on every node, as on HyperPod's AMI: lifecycle scripts run `sudo bash …`
  openssh-server              # sshd on every local node: SSH between the cluster's nodes (docs/ssh.md)
  slurmdbd mariadb-server     # Slurm accounting on each cluster's controller (docs/slurm.md)
  gettext-base                # envsubst: HyperPod's start_slurm.sh fills slurmd.service with it
  pdsh                        # pdsh -R ssh across the nodes, as MPI launchers and users fan out
  openmpi-bin                 # mpirun: its rsh launcher starts ranks on the other nodes over ssh
  procps                      # pgrep: hpodd asks a controller whether slurmctld has exited before its reboot
)

missing=()
for p in "${BUILD_PKGS[@]}" "${TEST_PKGS[@]}" "${RUN_PKGS[@]}" "${EXTRA_PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
