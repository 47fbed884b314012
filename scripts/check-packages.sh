#!/usr/bin/env bash
# Builds hpod's Debian packages from a built tree and checks them (issue 26):
#   scripts/check-packages.sh BUILD_DIR [OUT_DIR]
# - cpack makes hpod-agent_<v>_<arch>.deb and hpod_<v>_<arch>.deb (packaging/);
# - each holds what a host, or hpodd's machine, needs, and nothing of the other;
# - the units say what the issue asks (Restart=always, KillMode=process) and
#   point at the installed programs;
# - the dependencies name Slurm and munge, and hpod needs the same hpod-agent;
# - lintian reports no error and no warning that packaging/lintian does not
#   override with its reason (`--fail-on error,warning`).
# Prints the packages' paths and lintian's report. Run by ctest as `packages`.
set -euo pipefail

build=${1:?usage: check-packages.sh BUILD_DIR [OUT_DIR]}
out=${2:-$build/packages}
fail() { echo "check-packages: $*" >&2; exit 1; }

command -v dpkg-deb >/dev/null || fail "dpkg-deb is missing (apt install dpkg)"
command -v lintian >/dev/null || fail "lintian is missing (scripts/install-deps.sh installs it)"

rm -rf "$out"
mkdir -p "$out"
cpack --config "$build/CPackConfig.cmake" -B "$out" >"$out/cpack.log" 2>&1 ||
  { cat "$out/cpack.log" >&2; fail "cpack failed"; }

shopt -s nullglob
agents=("$out"/hpod-agent_*.deb) servers=("$out"/hpod_*.deb)
shopt -u nullglob
((${#agents[@]} == 1 && ${#servers[@]} == 1)) ||
  { ls -l "$out" >&2; fail "cpack did not make one hpod-agent and one hpod package"; }
agent=${agents[0]} server=${servers[0]}
echo "packages: $agent $server"

# Each package's file list, read once (grep -q on a pipe could end the writer early).
declare -A listing
for deb in "$agent" "$server"; do
  listing[$deb]=$(dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|')
done
has() { grep -qxF "$2" <<<"${listing[$1]}" || fail "$(basename "$1") lacks $2"; }
lacks() {
  ! grep -qxF "$2" <<<"${listing[$1]}" ||
    fail "$(basename "$1") holds $2, which belongs to the other package"
}

for f in /usr/bin/hpod-agent /usr/bin/hpod-node-init /usr/bin/hpod-auto-resume \
         /usr/lib/hpod/spank_hpod.so /lib/systemd/system/hpod-agent.service \
         /usr/share/doc/hpod-agent/copyright /usr/share/doc/hpod-agent/changelog.gz \
         /usr/share/lintian/overrides/hpod-agent; do
  has "$agent" "$f"
done
for f in /usr/bin/hpodd /usr/bin/hpod /lib/systemd/system/hpodd.service \
         /usr/share/hpod/examples/demo-cluster.json /usr/share/doc/hpod/copyright; do
  has "$server" "$f"
done
lacks "$agent" /usr/bin/hpodd
lacks "$server" /usr/bin/hpod-agent
if [[ -f $build/web/dist/index.html ]]; then has "$server" /usr/share/hpod/console/index.html; fi

unit() {  # the unit file $2 of package $1
  dpkg-deb --fsys-tarfile "$1" | tar -xO "./lib/systemd/system/$2"
}
au=$(unit "$agent" hpod-agent.service)
for line in "ExecStart=/usr/bin/hpod-agent join --foreground --state-dir /var/lib/hpod-agent" \
            "Restart=always" "KillMode=process" "RestartPreventExitStatus=78"; do
  grep -qx "$line" <<<"$au" || fail "hpod-agent.service lacks '$line'"
done
su=$(unit "$server" hpodd.service)
grep -q '^ExecStart=/usr/bin/hpodd ' <<<"$su" || fail "hpodd.service does not run /usr/bin/hpodd"
grep -qx "KillMode=process" <<<"$su" || fail "hpodd.service lacks KillMode=process"
! grep -q /usr/local <<<"$su" || fail "hpodd.service still names /usr/local"

adeps=$(dpkg-deb -f "$agent" Depends)
sdeps=$(dpkg-deb -f "$server" Depends)
for d in munge slurmd slurm-client; do
  grep -qw "$d" <<<"$adeps" || fail "hpod-agent does not depend on $d: $adeps"
done
grep -q "hpod-agent (= $(dpkg-deb -f "$agent" Version))" <<<"$sdeps" ||
  fail "hpod does not depend on the same hpod-agent: $sdeps"
grep -q "libc6" <<<"$adeps" || fail "hpod-agent's shared-library dependencies are missing: $adeps"

# Every file a root-owned system file: nothing of the builder's uid in them.
if dpkg-deb -c "$agent" | awk '{print $2}' | grep -v '^root/root$' | grep -q .; then
  fail "hpod-agent has files not owned by root"
fi

# (--show-overrides would make lintian count the overridden tags as failures.)
echo "lintian (informational tags included; overridden ones are in packaging/lintian):"
set +e
lintian --fail-on error,warning --display-info "$agent" "$server" >"$out/lintian.log" 2>&1
verdict=$?
set -e
grep -v '^running with root privileges' "$out/lintian.log" || true
((verdict == 0)) ||
  fail "lintian found problems (above); fix them or override them in packaging/lintian with the reason"

# The maintainer scripts reload systemd and restart, stop or purge the unit; none
# enables it (a first `hpod-agent join` does).
for deb in "$agent" "$server"; do
  ctl=$(mktemp -d)
  dpkg-deb -e "$deb" "$ctl"
  for script in postinst prerm postrm; do
    [[ -x $ctl/$script ]] || fail "$(basename "$deb") has no $script"
  done
  grep -q "try-restart" "$ctl/postinst" || fail "$(basename "$deb")'s postinst restarts nothing on upgrade"
  ! grep -Eq '^[^#]*(systemctl|deb-systemd-helper|deb-systemd-invoke)[^#]* (enable|start)' \
    "$ctl/postinst" || fail "$(basename "$deb")'s postinst enables or starts its unit"
  rm -rf "$ctl"
done
echo "check-packages: OK"
