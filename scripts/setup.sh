#!/usr/bin/env bash
# Installs what Farwing's tests and lab need on a Debian machine: OpenSSH (client and server, for
# the real ssh/scp bootstrap), iproute2 (network namespaces), iperf3 (TCP comparisons), the login
# shells a remote account may have (zsh, ksh, fish, csh, tcsh: the bootstrap must start under
# each), rsync (the filter and --delete tests' oracle), shellcheck (the remote scripts' lint), and qemu-user-static with binfmt_misc, so that a
# remote "linux/arm64" account in the lab runs the arm64 peer.
# Safe to run again; does nothing when everything is there. Needs root to install.
set -euo pipefail
need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
command -v iperf3 >/dev/null 2>&1 || need+=(iperf3)
command -v rsync >/dev/null 2>&1 || need+=(rsync)
for sh in zsh ksh fish csh tcsh; do command -v $sh >/dev/null 2>&1 || need+=($sh); done
command -v perl >/dev/null 2>&1 || need+=(perl-base)
command -v shellcheck >/dev/null 2>&1 || need+=(shellcheck)
[ "$(uname -m)" = aarch64 ] || [ -x /usr/bin/qemu-aarch64-static ] || need+=(qemu-user-static)
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
# binfmt_misc runs arm64 executables through qemu-aarch64-static (its F flag: the interpreter is
# opened now, so that it works inside the lab's namespaces too). Where the package's own
# registration did not happen (no systemd in a container), it is done here.
if [ "$(id -u)" -eq 0 ] && [ "$(uname -m)" != aarch64 ] && [ -f /usr/lib/binfmt.d/qemu-aarch64.conf ]; then
  b=/proc/sys/fs/binfmt_misc
  [ -e $b/register ] || mount -t binfmt_misc binfmt_misc $b 2>/dev/null || true
  if [ -e $b/register ] && [ ! -e $b/qemu-aarch64 ]; then
    cat /usr/lib/binfmt.d/qemu-aarch64.conf >$b/register 2>/dev/null || echo "setup: cannot register qemu-aarch64 with binfmt_misc; the arm64 lab test will skip" >&2
  fi
fi
