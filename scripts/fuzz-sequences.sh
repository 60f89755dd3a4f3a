#!/usr/bin/env bash
# The long campaign of the sequence fuzzer (issue 8, point 5): N random NFSv3 call sequences
# (default 10000) on the memory backend and on the local backend over the kernel's file system,
# every answer compared (crates/server/tests/sequences.rs). A failing sequence is shrunk and
# printed, and its seed is added to crates/server/tests/sequences.proptest-regressions, which CI
# reruns first: commit it with the fix.
#
#   scripts/fuzz-sequences.sh [N]
#
# Needs root (the local backend opens files by handle).
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-10000}
PROPTEST_CASES=$cases cargo test --release -p eagernfs-server --test sequences -- --nocapture
