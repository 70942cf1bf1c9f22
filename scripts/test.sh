#!/usr/bin/env bash
# quiclab's whole test suite: the same idempotent set-up as scripts/setup.sh (no default job), then linters,
# the Rust crate's tests and the Python tests (unit + integration tests on the real lab).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
source scripts/lib.sh

QUICLAB_SETUP_NO_JOB=1 bash scripts/setup.sh
# The stacks built on first use (lab/optional.py ON_DEMAND; the set-up leaves them alone) are built here, so their lab
# tests run (tests/lab/test_stacks.py): up to ~6 min on a machine that has none of them, ~0 when cached
# (docs/implementations.md, "Stacks built on first use"). One that cannot be built is one line and its tests skip.
step "building the stacks built on first use (haproxy, aioquic, quicgo)"
uv run --frozen quiclab build --parts haproxy,aioquic,quicgo

# The HTML report is checked by rendering it in headless Chromium (Debian's package).
if ! command -v chromium >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  step "installing Debian's chromium for the report rendering test"
  { DEBIAN_FRONTEND=noninteractive apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends chromium >/dev/null; } \
    || warn "could not install chromium: the report rendering test will skip"
fi

step "ruff"
uv run --frozen ruff check lab tests
bash scripts/lint-workflows.sh  # actionlint (skipped, saying why, without Go) and zizmor on .github/workflows
if [ -f linkem/Cargo.toml ]; then
  if command -v cargo >/dev/null; then
    step "linkem: cargo clippy + cargo test"
    (cd linkem && cargo clippy --locked --all-targets -q -- -D warnings && cargo test --locked -q 2>&1 | tail -n 30)
  else
    warn "cargo not installed: the linkem crate's own tests are skipped here (its image build still compiles it)"
  fi
fi
step "pytest"
uv run --frozen pytest -q -rsx "$@"  # -rsx: every skip and expected failure is listed with its reason
