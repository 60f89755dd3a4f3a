#!/usr/bin/env bash
# The server before (f013de7) and after (df6c35a) write delegations, CB_GETATTR, the
# per-COMPOUND journal wait, the CRC-32 request digest and the descriptor cache's batch
# eviction (issue 36), in rounds, the order turned every other round:
#   iops  scripts/bench-iops.sh once with each server (libnfs's nfsiops as the client, ganesha
#         measured in each run too)
#   nfs4  scripts/bench-nfs4.sh --rounds 1 --before BEFORE with EAGERNFS_BIN=AFTER: the four
#         targets before-v3, eagernfs-v3, before-v41, eagernfs-v41 in one run, AFTER's
#         generator for all, so only the server differs
# Both scripts pin the server to CPU 1 and the client to CPU 0.
#
#   [FIRST=N] ab.sh iops|nfs4 ROUNDS OUT BEFORE_BIN AFTER_BIN     (rounds FIRST..ROUNDS)
#
# The machine is shared: before each run the 1-minute load average must fall to 1.5 or below
# (waiting at most 1.5 min, and noting it when it did not), and each run holds
# /work/bench.lock exclusively, so no other benchmark or build that takes the lock overlaps
# it. OUT/runs.tsv gets: script, round, label, end time (UTC), load at start (in the lock),
# load at end, seconds waited for the load (outside+inside the lock), stress-ng processes
# running at the start (someone's stress test), whether the lock was held, out dir.
set -euo pipefail
kind=$1 rounds=$2 out=$3 before=$4 after=$5
repo=$(cd "$(dirname "$0")/../../.." && pwd)
mkdir -p "$out"
load1() { cut -d' ' -f1 /proc/loadavg; }
one() { # label dir bin cmd...
    local label=$1 dir=$2 bin=$3 start waited
    shift 3
    start=$(date +%s)
    # At most 30 s for the load to fall outside the lock, then at most 1 min inside it (where
    # nothing else that takes the lock runs): others' builds kept it above 1.5 for hours.
    while awk -v l="$(load1)" 'BEGIN { exit !(l > 1.5) }' && [ $(($(date +%s) - start)) -lt 30 ]; do
        sleep 10
    done
    waited=$(($(date +%s) - start))
    # shellcheck disable=SC2016
    local body='
        start=$(date +%s)
        while awk -v l="$(cut -d" " -f1 /proc/loadavg)" "BEGIN { exit !(l > 1.5) }" && [ $(($(date +%s) - start)) -lt 60 ]; do
            sleep 5
        done
        echo "$(cut -d" " -f1-3 /proc/loadavg)	$(($(date +%s) - start))	$(pgrep -c stress-ng)	$LOCKED" >"$1/.load-start"
        EAGERNFS_BIN=$2 "${@:4}" >"$3" 2>&1
    '
    # At most 1 min for the lock: on 2026-11-28 a leaked rpc.statd had inherited a test's shared
    # lock and held it for good; then the run goes ahead without it, and runs.tsv says so.
    local rc=0
    LOCKED=yes flock -x -w 60 -E 75 /work/bench.lock bash -c "$body" _ "$out" "$bin" "$dir.log" "$@" || rc=$?
    if [ "$rc" = 75 ]; then
        LOCKED=no bash -c "$body" _ "$out" "$bin" "$dir.log" "$@" || rc=$?
    fi
    [ "$rc" = 0 ] || [ "$rc" = 75 ] || echo "ab.sh: $dir failed, see $dir.log" >&2
    echo -e "$kind\t$r\t$label\t$(date -u +%H:%M)\t$(cut -f1 "$out/.load-start")\t$(cut -d' ' -f1-3 /proc/loadavg)\t$waited+$(cut -f2 "$out/.load-start")\t$(cut -f3 "$out/.load-start")\t$(cut -f4 "$out/.load-start")\t$(basename "$dir")" >>"$out/runs.tsv"
    rm -f "$out/.load-start"
}
for r in $(seq "${FIRST:-1}" "$rounds"); do
    case $kind in
        iops)
            if [ $((r % 2)) = 1 ]; then order="before after"; else order="after before"; fi
            for label in $order; do
                if [ "$label" = before ]; then bin=$before; else bin=$after; fi
                one "$label" "$out/iops-$label-r$r" "$bin" "$repo/scripts/bench-iops.sh" --out "$out/iops-$label-r$r"
            done
            ;;
        nfs4)
            targets="before-v3 eagernfs-v3 before-v41 eagernfs-v41"
            [ $((r % 2)) = 0 ] && targets="eagernfs-v41 before-v41 eagernfs-v3 before-v3"
            one both "$out/nfs4-r$r" "$after" "$repo/scripts/bench-nfs4.sh" --rounds 1 --before "$before" \
                --targets "$targets" --out "$out/nfs4-r$r"
            ;;
        *) echo "ab.sh: iops or nfs4, not $kind" >&2; exit 2 ;;
    esac
done
