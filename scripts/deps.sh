#!/usr/bin/env bash
# deps.sh - installs the Debian packages pccl needs to build, test and run its demo.
# Idempotent: only calls apt-get when something is missing. --bench adds what bench/run.sh
# compares against (OpenMPI) and measures the loopback with (iperf3).
set -euo pipefail
PKGS=(build-essential cmake pkg-config libuv1-dev libcjson-dev libsodium-dev libssl-dev zlib1g-dev libomp-dev libmicrohttpd-dev
      scdoc bats zsh fish python3 curl dataset-fashion-mnist iproute2 iptables procps systemd python3-yaml python3-cryptography prometheus chromium
      python3-cffi python3-numpy python3-torch python3-pytest python3-setuptools python3-pip python3-venv
      libgloo-dev)
[ "${1:-}" = --bench ] && PKGS+=(openmpi-bin libopenmpi-dev iperf3 jq)
missing=()
for p in "${PKGS[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    echo "installing: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
