#!/usr/bin/env bash
# Installs what capshim needs on a Debian 12 machine: the Vulkan loader and
# lavapipe, the GNU Objective-C compiler (for the Metal shim's Linux tests),
# a virtual environment in .venv with capshim and its dependencies, and the
# native shims. Safe to run again: each step is skipped when already done.
set -euo pipefail
cd "$(dirname "$0")"

APT_PACKAGES=(build-essential cmake python3-venv python3-dev mesa-vulkan-drivers libvulkan-dev
              vulkan-tools vulkan-validationlayers gobjc valgrind
              postgresql)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PY --version)" >&2
  "$PY" -m venv .venv
fi
stamp=.venv/.capshim-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing capshim and its dependencies into .venv" >&2
  # --no-compile: pip byte-compiled every module of every package (scipy, matplotlib, hypothesis, ...)
  # and that was half of setup's time in a fresh clone (145 s against 78 s on the 2-core machine,
  # load 7); Python compiles what is imported on first use. The venv's own pip (23.x) installs
  # the editable project, so no pip upgrade (a download and a reinstall) either.
  .venv/bin/python -m pip install -q --no-compile -e '.[test]'
  touch "$stamp"
fi
echo "setup: building the native shims" >&2
.venv/bin/capshim build >&2
echo "setup: done" >&2
