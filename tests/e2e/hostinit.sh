#!/bin/bash
# PID 1 of a rig host (tests/e2e/hostrig.py): a machine of its own that plays
# systemd for hpod-agent, as hpod-agent.service does on a real host.
#
#   hostinit.sh DISK NAME AGENT SERVER TOKEN INSTANCE_TYPE [SPANK_PLUGIN]
#
# DISK is the host's own disk (a directory of the rig, kept across reboots). The
# host gets private /tmp, /run, /var/lib, /var/log, /var/spool, /home, /opt and /srv (tmpfs),
# its own /etc/machine-id, /etc/hosts and boot id, and then hides /var/tmp too: nothing of
# hpodd's data dir or sockets, nor of another host, is visible here. The only
# inputs the agent gets are the URL and the token on its command line, as a
# person pastes them (the token only until the machine has joined).
#
# Like Restart=always with RestartPreventExitStatus=78: the agent is started
# again a second after it exits, unless it exited 78 (hpodd refused this host).
# SIGUSR1 reboots: every other process of the host is killed, the boot id
# changes, the disk stays, and the agent starts again.
set -u
disk=$1 name=$2 agent=$3 server=$4 token=$5 itype=$6 spank=${7:-}

hostname "$name"
mkdir -p "$disk/hpod-agent" "$disk/log"
# As /etc/machine-id holds it: 32 lowercase hex and a newline.
[[ -s $disk/machine-id ]] ||
  printf '%s\n' "$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')" >"$disk/machine-id"
cat /proc/sys/kernel/random/uuid >"$disk/boot_id"
mount --bind "$disk/machine-id" /etc/machine-id
# Its own /etc/hosts, as every machine has (the agent keeps the cluster's names in it).
[[ -e $disk/hosts ]] || cp /etc/hosts "$disk/hosts"
mount --bind "$disk/hosts" /etc/hosts
mount --bind "$disk/boot_id" /proc/sys/kernel/random/boot_id
# After /var/tmp is hidden the disk is reached only through what is bound or open.
new_boot_id() { cat /proc/sys/kernel/random/uuid >/proc/sys/kernel/random/boot_id; }
# The agent as the package installs it: a copy of its own, since the tree it was
# built in may lie under a directory this host hides (a CI clone in /tmp).
mount -t tmpfs -o mode=755 tmpfs /opt
mkdir -p /opt/hpod/bin
cp "$agent" /opt/hpod/bin/hpod-agent
agent=/opt/hpod/bin/hpod-agent
# hpod's SPANK plugin, where hpodd's --pool-spank-plugin says (the package puts
# it in /usr/lib/hpod; /usr is the machine's here).
if [[ -n $spank ]]; then
  mkdir -p /opt/hpod/lib
  cp "$spank" /opt/hpod/lib/spank_hpod.so
fi
# The packaged unit for a systemd host (below), taken while the tree it lies in
# is visible (a CI clone under /tmp is hidden next).
if [[ ${HOSTRIG_INIT:-} == systemd ]]; then
  cp "$HOSTRIG_AGENT_UNIT" "$disk/hpod-agent.service.package"
fi
for d in /tmp /run /var/lib /var/log /var/spool /home /srv; do
  mount -t tmpfs -o mode=755 tmpfs "$d"
done
chmod 1777 /tmp
mkdir -p /var/lib/hpod-agent
mount --bind "$disk/hpod-agent" /var/lib/hpod-agent

# HOSTRIG_INIT=systemd: the machine runs real systemd (Debian's) as its PID 1
# instead of the loop below, and hpod-agent.service as the package installs it
# (HOSTRIG_AGENT_UNIT: packaging/hpod-agent.service), not yet enabled: the
# first `hpod-agent join` typed in the host hands the agent to it. The host's
# /etc/systemd/system is its own (kept on its disk), so what systemctl enable,
# the agent's drop-ins or a lifecycle script write there stays on the host.
# systemd runs in hybrid mode (the machine's name=systemd hierarchy; hostrig
# refuses a machine without it) in a cgroup namespace rooted at hpr-<name> in
# each hierarchy, under the rig's own cgroups (hostrig.sweep() removes them),
# and gets none of
# Debian's static .wants or generators: it starts the journal and what is
# enabled here (munge, as Debian enables it; the agent once joined; what a
# script enables), and nothing that would act on the real machine (udev,
# sysctl, the clock, fstab).
if [[ ${HOSTRIG_INIT:-} == systemd ]]; then
  # systemd names the machine from /etc/hostname, as a real one's is.
  echo "$name" >"$disk/hostname"
  mount --bind "$disk/hostname" /etc/hostname
  mkdir -p "$disk/systemd-etc/hpod-agent.service.d"
  mount --bind "$disk/systemd-etc" /etc/systemd/system
  [[ -e /etc/systemd/system/hpod-agent.service ]] ||
    cp "$disk/hpod-agent.service.package" /etc/systemd/system/hpod-agent.service
  printf '%s\n' "# The rig's agent is a copy in /opt/hpod/bin (the package's is /usr/bin)," \
    "# and its log goes where hostrig reads it." "[Service]" "ExecStart=" \
    "ExecStart=/opt/hpod/bin/hpod-agent join --foreground --state-dir /var/lib/hpod-agent" \
    "StandardOutput=append:/var/log/hpod-rig/agent.log" "StandardError=inherit" \
    >/etc/systemd/system/hpod-agent.service.d/rig.conf
  # Enabled units start at boot (multi-user.target), munge as Debian enables it.
  printf '%s\n' "[Unit]" "Description=hpod test rig host" \
    "Wants=systemd-journald.socket systemd-journald.service multi-user.target" \
    "After=multi-user.target" >/etc/systemd/system/hpod-rig.target
  mkdir -p /etc/systemd/system/multi-user.target.wants
  ln -sfn /lib/systemd/system/munge.service /etc/systemd/system/multi-user.target.wants/
  # journald's /dev/log link would land in the machine's /dev.
  ln -sfn /dev/null /etc/systemd/system/systemd-journald-dev-log.socket
  mkdir -p /var/log/hpod-rig
  mount --bind "$disk/log" /var/log/hpod-rig
  : >>"$disk/log/systemd.log"
  mount --bind "$disk/log/systemd.log" /dev/console # systemd's own messages
  # PID 1 in the host's cgroup namespace: its own cgroup tree, then systemd.
  printf '%s\n' '#!/bin/bash' 'set -e' \
    'mount -t tmpfs -o mode=755 tmpfs /sys/fs/cgroup' \
    'mkdir /sys/fs/cgroup/systemd /sys/fs/cgroup/unified' \
    'mount -t cgroup -o none,name=systemd cgroup /sys/fs/cgroup/systemd' \
    'mount -t cgroup2 cgroup2 /sys/fs/cgroup/unified' \
    'for d in /usr/lib/systemd/system/*.wants /usr/lib/systemd/system-generators; do' \
    '  mount -t tmpfs -o mode=755,ro tmpfs "$d"' \
    'done' \
    'export container=hpod-rig' \
    'exec /lib/systemd/systemd --unit=hpod-rig.target --log-target=console' \
    >/opt/hpod/bin/rig-systemd
  chmod 755 /opt/hpod/bin/rig-systemd
  # A cgroup of its own in every hierarchy the machine has mounted, under the one
  # this init runs in (systemd mounts the controllers it finds, rooted there).
  while IFS=: read -r _ ctrls path; do
    case $ctrls in
      "") dir=/sys/fs/cgroup/unified ;;
      name=systemd) dir=/sys/fs/cgroup/systemd ;;
      name=*) continue ;;
      *) dir=/sys/fs/cgroup/$ctrls ;;
    esac
    mountpoint -q "$dir" || continue
    mkdir -p "$dir$path/hpr-$name"
    for f in cpuset.cpus cpuset.mems; do # an empty cpuset takes no process
      [[ -e $dir$path/$f ]] && cat "$dir$path/$f" >"$dir$path/hpr-$name/$f"
    done
    echo $$ >"$dir$path/hpr-$name/cgroup.procs"
  done </proc/self/cgroup
  # What Debian's munge package made, on the host's own /var/lib and /var/log.
  install -d -o munge -g munge -m 0700 /var/lib/munge /var/log/munge
  mount -t tmpfs -o mode=755 tmpfs /var/tmp # the disk's path hidden, as below
  echo "host $name up (systemd), boot id $(cat /proc/sys/kernel/random/boot_id)" \
    >>/var/log/hpod-rig/agent.log
  exec unshare --cgroup /opt/hpod/bin/rig-systemd
fi

exec 3>>"$disk/log/agent.log"
mount -t tmpfs -o mode=755 tmpfs /var/tmp  # last: the disk's path is hidden too
echo "host $name up, boot id $(cat /proc/sys/kernel/random/boot_id)" >&3

reboot_asked=0
trap 'reboot_asked=1' USR1
trap 'kill -TERM $child 2>/dev/null; wait; exit 0' TERM
child=0
while true; do
  # hpodd's `reboot`: this init's SIGUSR1 (below), as systemctl reboot would be.
  args=(join --state-dir /var/lib/hpod-agent --foreground --reboot-command "kill -USR1 1")
  [[ -e /var/lib/hpod-agent/join.json ]] ||
    args+=(--server "$server" --token "$token" --instance-type "$itype")
  "$agent" "${args[@]}" >&3 2>&1 3>&- &
  child=$!
  # `wait` returns early on a trapped signal; wait again until the agent is gone.
  while kill -0 "$child" 2>/dev/null; do
    wait "$child"
    rc=$?
    if ((reboot_asked)); then break; fi
  done
  if ((reboot_asked)); then
    reboot_asked=0
    echo "rebooting" >&3
    # Everything but PID 1 (this script) goes, as on a real reboot.
    for p in $(ls /proc | grep -E '^[0-9]+$'); do
      ((p != 1)) && kill -9 "$p" 2>/dev/null
    done
    wait 2>/dev/null
    # What the agent mounted goes with the boot (its FUSE daemon is dead now).
    umount -l /fsx 2>/dev/null
    new_boot_id
    echo "host $name up, boot id $(cat /proc/sys/kernel/random/boot_id)" >&3
    continue
  fi
  echo "agent exited $rc" >&3
  if ((rc == 78)); then
    echo "hpodd refused this host: not restarting the agent" >&3
    while true; do sleep 3600 & wait $!; done
  fi
  sleep 1
done
