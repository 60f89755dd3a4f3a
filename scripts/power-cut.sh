#!/usr/bin/env bash
# Issue 35's power-cut test, the long series (scripts/test runs a few rounds of it): the export on
# ext4 on a loop device, clients creating, writing, renaming, removing and chmodding through the
# server, the server frozen at a random moment and the disk image copied; every change a client
# had a reply for must be on the copy (crates/cli/tests/e2e_power_cut.rs says why the copy is what
# a power cut leaves). Needs root and loop devices.
#
#   scripts/power-cut.sh [--rounds N] [--seed S] [--mode default|journal|both]
#
# --rounds: per mode (default 100). --seed: the first round's seed (default: from the clock); the
# test prints the seed of every round, and EAGERNFS_POWER_CUT_SEED=S --rounds 1 repeats one.
# --mode: the honest default (`sync`, no journal), `--journal`, or both (default).
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=100
seed=
mode=both
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        --seed) seed=$2; shift 2 ;;
        --mode) mode=$2; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "power-cut.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
case "$mode" in
    default) filter=(acknowledged_changes_survive_a_power_cut --exact) ;;
    journal) filter=(acknowledged_changes_survive_a_power_cut_with_the_journal --exact) ;;
    both) filter=() ;;
    *) echo "power-cut.sh: --mode default, journal or both, not $mode" >&2; exit 2 ;;
esac
case "$rounds" in
    ''|*[!0-9]*) echo "power-cut.sh: --rounds takes a number, not $rounds" >&2; exit 2 ;;
esac

export EAGERNFS_POWER_CUT_ROUNDS=$rounds EAGERNFS_REQUIRE_LOOP=1
[ -n "$seed" ] && export EAGERNFS_POWER_CUT_SEED=$seed
exec cargo test -p eagernfs --test e2e_power_cut -- --nocapture --test-threads=1 "${filter[@]}"
