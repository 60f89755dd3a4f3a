#!/usr/bin/env bash
# Server CPU per call with 1, 2 and 3 heads on one CephFS (issue 20: adding heads must add no
# per-call cost). In each round, first a control (one `eagernfs serve` without --node-id: no
# RADOS, no cluster state), then for k = 1, 2, 3 (alternating, in the same run): k heads are
# started (scripts/heads.sh), and 8 KiB random READs and then WRITEs at a total queue depth of 16
# (tests/clients/nfsiops.c, libnfs) are spread over them — 16/k threads per head, each head on
# a 64 MiB file in a directory of its own (no capability is shared between heads). The heads'
# and the Ceph daemons' CPU ticks (/proc/PID/stat utime+stime) are read around each step:
#   head µs per call    = heads' CPU time / calls answered
#   cluster µs per call = MON+MGR+OSD+MDS CPU time / calls answered
#
#   scripts/bench-heads.sh [--rounds 3] [--seconds 10] [--max-heads 3] [--out DIR]
#
# Pinning (as scripts/bench-ceph.sh): clients on CPU 0, heads on CPU 1, the Ceph daemons on both.
# Writes DIR/results.tsv and DIR/table.md (default docs/benchmarks/heads-YYYY-MM-DD). Uses the
# test cluster in CEPH_CLUSTER_DIR (default target/ceph-soak, ports 47389/47400; started, and
# then stopped, here if not running), heads on HEADS_ADDR_BASE+N (127.0.3.10+N):HEADS_PORT (47530).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
rounds=3 seconds=10 max_heads=3 out=""
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) rounds=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --max-heads) max_heads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
    esac
done
for v in rounds seconds max_heads; do
    [[ ${!v} =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || { echo "bench-heads.sh: --${v//_/-} takes a positive whole number" >&2; exit 2; }
done
[ "$max_heads" -le 9 ] && [ "$rounds" -le 100 ] && [ "$seconds" -le 600 ] ||
    { echo "bench-heads.sh: --max-heads 1..9, --rounds 1..100, --seconds 1..600" >&2; exit 2; }
out=${out:-$root/docs/benchmarks/heads-$(date -u +%F)}
export CEPH_CLUSTER_DIR=${CEPH_CLUSTER_DIR:-$root/target/ceph-soak}
export CEPH_MON_PORT=${CEPH_MON_PORT:-47389} CEPH_PORT_MIN=${CEPH_PORT_MIN:-47400}
export HEADS_ADDR_BASE=${HEADS_ADDR_BASE:-127.0.3.10} HEADS_PORT=${HEADS_PORT:-47530}
export HEADS_NAMESPACE=bench-$$-$(date +%s) HEADS_GRACE=5
bin=${EAGERNFS:-$root/target/release/eagernfs}
[ -x "$bin" ] || { echo "bench-heads.sh: no release build: cargo build --release -p eagernfs-cli, or set EAGERNFS" >&2; exit 1; }
export EAGERNFS=$bin
log() { echo "bench-heads.sh: $(date -u +%T) $*" >&2; }

work=$(mktemp -d /tmp/bench-heads.XXXXXX)
export HEADS_DIR=$work/heads
started_cluster=0 mnt=""
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_standalone
    [ -n "$mnt" ] && { timeout 60 "$bin" umount "$mnt" 2>/dev/null || "$bin" umount -z "$mnt" 2>/dev/null || true; }
    "$root/scripts/heads.sh" stop 2>/dev/null || true
    if [ "$started_cluster" = 1 ]; then "$root/scripts/ceph-cluster.sh" stop >/dev/null 2>&1 || true; fi
    rm -rf "$work"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cc -O2 -Wall -o "$work/nfsiops" "$root/tests/clients/nfsiops.c" -lnfs -lpthread
if ! "$root/scripts/ceph-cluster.sh" status >/dev/null 2>&1; then
    log "starting the test cluster in $CEPH_CLUSTER_DIR"
    started_cluster=1
    "$root/scripts/ceph-cluster.sh" start >/dev/null
fi
cluster_pids() { "$root/scripts/ceph-cluster.sh" pids | awk -v w="${1:-}" 'w == "" || $1 ~ "^" w {print $2}'; }
for p in $(cluster_pids); do taskset -a -cp 0,1 "$p" >/dev/null; done
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
sum_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(cpu_ticks "$p"))); done; echo "$t"; }
hz=$(getconf CLK_TCK)
addr() { echo "${HEADS_ADDR_BASE%.*}.$((${HEADS_ADDR_BASE##*.} + $1))"; }
head_pids() { "$root/scripts/heads.sh" status | awk '$4 == "up" {print $3}'; }
standalone_pid=""
stop_standalone() {
    [ -n "$standalone_pid" ] || return 0
    kill -TERM "$standalone_pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$standalone_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$standalone_pid" 2>/dev/null || true
    wait "$standalone_pid" 2>/dev/null || true
    standalone_pid=""
}
start_standalone() { # the control: one server without --node-id (no RADOS, no cluster state)
    "$root/scripts/heads.sh" stop
    : >"$work/standalone.out"
    "$bin" serve "cephfs://admin@cephfs/?conf=$CEPH_CLUSTER_DIR/ceph.conf" --listen "$(addr 1):$HEADS_PORT" \
        -o rw,no_root_squash --state-dir "$work/standalone" >"$work/standalone.out" 2>"$work/standalone.log" &
    standalone_pid=$!
    for _ in $(seq 600); do grep -q "listening on" "$work/standalone.out" && break; sleep 0.05; done
    grep -q "listening on" "$work/standalone.out" || { log "the standalone server did not start: $(tail -3 "$work/standalone.log")"; exit 1; }
    taskset -a -cp 1 "$standalone_pid" >/dev/null
}
start_heads() { # k: heads 1..k, pinned to CPU 1
    "$root/scripts/heads.sh" stop
    "$root/scripts/heads.sh" start "$1" >/dev/null
    local p
    for p in $(head_pids); do taskset -a -cp 1 "$p" >/dev/null; done
}

# The files: one directory and a 64 MiB file per head, written through head 1.
start_heads 1
mnt=$work/mnt
mkdir -p "$mnt"
"$bin" mount "nfs://$(addr 1):$HEADS_PORT/" "$mnt" -o vers=3 >&2
top=bench-heads-$$
for j in $(seq "$max_heads"); do
    mkdir -p "$mnt/$top/h$j"
    head -c $((64 << 20)) /dev/urandom >"$mnt/$top/h$j/iops"
done
sync
"$bin" umount "$mnt"
mnt=""

mkdir -p "$out"
tsv=$out/results.tsv
printf 'round\theads\tmode\tcalls\tseconds\tcalls_per_s\thead_ticks\tcluster_ticks\thead_us_per_call\tcluster_us_per_call\tmds_us_per_call\tosd_us_per_call\n' >"$tsv"
for round in $(seq "$rounds"); do
    for k in $(seq 0 "$max_heads"); do
        if [ "$k" = 0 ]; then
            start_standalone
            hp=("$standalone_pid") nh=1
        else
            stop_standalone
            start_heads "$k"
            hp=($(head_pids)) nh=$k
            [ "${#hp[@]}" = "$k" ] || { log "expected $k heads up, found ${#hp[@]}"; exit 1; }
        fi
        cp=($(cluster_pids)) mp=($(cluster_pids mds)) op=($(cluster_pids osd))
        # Warm: each head reads its file once (as it would have served it), untimed.
        for j in $(seq "$nh"); do
            taskset -c 0 "$bin" cat "nfs://$(addr "$j"):$HEADS_PORT/$top/h$j/iops" >/dev/null
        done
        for mode in read write; do
            pids=() outs=()
            h0=$(sum_ticks "${hp[@]}") c0=$(sum_ticks "${cp[@]}") m0=$(sum_ticks "${mp[@]}") o0=$(sum_ticks "${op[@]}")
            for j in $(seq "$nh"); do
                qd=$(( 16 / nh + (j <= 16 % nh ? 1 : 0) ))
                taskset -c 0 "$work/nfsiops" "nfs://$(addr "$j")/?nfsport=$HEADS_PORT&mountport=$HEADS_PORT&version=3" \
                    "$top/h$j/iops" "$mode" "$seconds" "$qd" >"$work/out-$j" &
                pids+=($!)
            done
            for p in "${pids[@]}"; do wait "$p"; done
            h1=$(sum_ticks "${hp[@]}") c1=$(sum_ticks "${cp[@]}") m1=$(sum_ticks "${mp[@]}") o1=$(sum_ticks "${op[@]}")
            calls=0 secs=0
            for j in $(seq "$nh"); do
                calls=$((calls + $(sed -n 's/^ops=\([0-9]*\) .*/\1/p' "$work/out-$j")))
                secs=$(sed -n 's/.* seconds=\([0-9.]*\) .*/\1/p' "$work/out-$j")
            done
            row=$(awk -v r="$round" -v k="$k" -v m="$mode" -v n="$calls" -v s="$secs" -v ht=$((h1 - h0)) \
                -v ct=$((c1 - c0)) -v mt=$((m1 - m0)) -v ot=$((o1 - o0)) -v hz="$hz" \
                'BEGIN { printf "%s\t%s\t%s\t%d\t%.2f\t%.0f\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f", r, k, m, n, s, n / s, ht, ct, ht / hz * 1e6 / n, ct / hz * 1e6 / n, mt / hz * 1e6 / n, ot / hz * 1e6 / n }')
            echo "$row" >>"$tsv"
            log "round $round, $k heads, $mode: $row"
        done
    done
done
"$root/scripts/heads.sh" stop
stop_standalone

# The table: medians over rounds, and the ratio to one head.
python3 - "$tsv" >"$out/table.md" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
med = {}
for mode in ("read", "write"):
    for k in sorted({r[1] for r in rows}, key=int):
        sel = [r for r in rows if r[1] == k and r[2] == mode]
        med[mode, k] = tuple(statistics.median(float(r[i]) for r in sel) for i in (5, 8, 9, 10, 11))
print("| 8 KiB, QD16 in all | heads | calls/s | head CPU µs per call | vs 1 head | cluster CPU µs per call | vs 1 head | of it MDS | of it OSD |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for (mode, k), (rate, h, c, m, o) in med.items():
    r1 = med[mode, "1"]
    label = "1, no --node-id (control)" if k == "0" else k
    print(f"| {mode} | {label} | {rate:.0f} | {h:.1f} | {h / r1[1]:.2f} | {c:.1f} | {c / r1[2]:.2f} | {m:.1f} | {o:.1f} |")
print(f"\nMedians of {len({r[0] for r in rows})} rounds; every round in results.tsv.")
EOF
cat "$out/table.md"
