#!/usr/bin/env bash
# Installs what Farwing's tests and lab need on a Debian machine: OpenSSH (client and server, for
# the real ssh/scp bootstrap), iproute2 (network namespaces) and iperf3 (TCP comparisons).
# Safe to run again; does nothing when everything is there. Needs root to install.
set -euo pipefail
need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
command -v b3sum >/dev/null 2>&1 || true
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "setup: missing ${need[*]}; run as root (sudo make test) to install them, or install them yourself" >&2
    exit 0
  fi
  echo "setup: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# sshd wants its privilege-separation directory.
[ "$(id -u)" -ne 0 ] || mkdir -p /run/sshd
