#!/usr/bin/env bash
# quiclab's whole test suite: the same idempotent set-up as scripts/setup.sh (no default job), then linters,
# the Rust crate's tests and the Python tests (unit + integration tests on the real lab).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"
source scripts/lib.sh

QUICLAB_SETUP_NO_JOB=1 bash scripts/setup.sh
# The stacks built on first use (lab/optional.py ON_DEMAND; the set-up leaves them alone) are built here, so their lab
# tests run (tests/lab/test_stacks.py, tests/lab/test_stacks_rust.py, tests/lab/test_stacks_java.py): haproxy,
# aioquic and quicgo up to ~6 min on a machine that has none of them; the Rust stacks quinn and quiche (images/rust:
# crates.io, quiche's vendored BoringSSL) more: docs/implementations.md, "The Rust stacks"; kwik (images/kwik: OpenJDK
# 21 and Maven from trixie, Maven Central; its JUnit tests run in the build) 6 min 10 s from nothing under a 35 % CPU
# cap (docs/implementations.md, "kwik"); ~0 when cached. One that cannot be built is one line and its tests skip.
step "building the stacks built on first use (haproxy, aioquic, quicgo, quinn, quiche, kwik)"
uv run --frozen quiclab build --parts haproxy,aioquic,quicgo,quinn,quiche,kwik

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

# The netem group (tests marked `netem`: the lab shaped by tc netem) needs a kernel with sch_netem. Where this
# host's has none it runs in a VM with Debian's stock kernel (scripts/vm.sh: the image is built once and cached);
# skipped, saying why, only where QEMU cannot run at all. Only for the whole suite (no pytest arguments).
# QUICLAB_VM_SMP / QUICLAB_VM_CPUS size and pin the VM (scripts/vm.sh).
# On by default (QUICLAB_TEST_VM=off skips it, saying so): since the router's commands go through its agent the group
# took 11 min 38 s under TCG emulation (2 vCPUs, 15 passed; 36.8 min before), the VM part 17 min 18 s with the image
# built from nothing, the whole command from a clean clone 45 min 21 s (2026-11-27; issue 34).
if [ $# -eq 0 ] && [ "${QUICLAB_TEST_VM:-on}" = off ]; then
  warn "the netem group in a VM is skipped: QUICLAB_TEST_VM=off"
elif [ $# -eq 0 ]; then
  if uv run --frozen python -c 'import sys; from lab.link import router; sys.exit(0 if router.has_netem() else 1)' \
       2>/dev/null; then
    ok "the netem group ran above: this host's kernel has sch_netem"
  elif why=$(bash scripts/vm.sh check 2>&1 >/dev/null); then
    step "the netem group in a VM with Debian's stock kernel (scripts/vm.sh)"
    t0=$SECONDS
    bash scripts/vm.sh run -- uv run --frozen pytest -q -rsx -m netem tests/lab
    ok "the netem group passed in the VM ($((SECONDS - t0)) s)"
  else
    warn "the netem group is skipped: ${why#*error: }"
  fi
fi
