#!/usr/bin/env bash
# The deterministic simulator's long run (issue 8, point 1): N seeds (default 10000) of the real
# server core over a simulated network (drops, duplicates, delays, reordering, resets) and
# server restarts, each checked against a fault-free run (crates/server/tests/sim.rs). A failing
# seed prints its whole trace; rerun one with SIM_SEED=N.
#
#   scripts/sim.sh [N] [FIRST_SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
SIM_SEEDS=${1:-10000} SIM_FIRST_SEED=${2:-1} cargo test --release -p eagernfs-server --test sim -- --nocapture
