#!/usr/bin/env bash
# Lint the GitHub Actions workflows (.github/workflows): actionlint (a Go module, built once into a cache
# directory; it runs shellcheck on every `run:` script when shellcheck is installed) and zizmor (security
# findings; a PyPI package in the project's dev group). Without Go, actionlint is skipped and the reason printed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
# shellcheck source=scripts/lib.sh
source scripts/lib.sh

actionlint_version=v1.7.12
bin=${QUICLAB_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/quiclab/bin}

if command -v go >/dev/null; then
  if ! "$bin/actionlint" -version 2>/dev/null | grep -qx "$actionlint_version"; then
    step "installing actionlint $actionlint_version into $bin (go install)"
    mkdir -p "$bin"
    GOBIN=$bin go install "github.com/rhysd/actionlint/cmd/actionlint@$actionlint_version"
  fi
  if ! command -v shellcheck >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    step "installing Debian's shellcheck (actionlint checks the workflows' run: scripts with it)"
    { DEBIAN_FRONTEND=noninteractive apt-get update -qq \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends shellcheck >/dev/null; } \
      || warn "could not install shellcheck"
  fi
  command -v shellcheck >/dev/null \
    || warn "shellcheck not installed: actionlint checks the workflows but not the shell scripts in their run: steps"
  step "actionlint $actionlint_version"
  "$bin/actionlint" -no-color
  ok "actionlint: .github/workflows clean"
else
  warn "go not installed: actionlint (the GitHub workflows' lint) is skipped; install Go to run it"
fi

step "zizmor (workflow security audit, offline)"
uv run --frozen zizmor --offline --no-progress .github/workflows
