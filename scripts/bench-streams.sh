#!/usr/bin/env bash
# Streams against the loopback ceiling (issue 11): 1 MiB READ and WRITE RPCs, 8 in flight
# (`eagernfs bench stream`), against eagernfs (ext4 directory; READs spliced with --splice always,
# and copied as the default does for a loopback client), eagernfs --memory, and nfs-ganesha FSAL VFS, with iperf3 over the same loopback
# measured between them: the ceiling is what one TCP stream carries with the same pinning
# (server on CPU 1, client on CPU 0). READ is compared with iperf3 -R (the server sends), WRITE
# with iperf3 (the client sends). Each round measures everything once, in the same order;
# medians over the rounds. The file is read right after it was written, so READs come from the
# server's page cache: this measures the server and the network path, not the disk. WRITE is
# reported twice: to the last WRITE reply, and to the reply of the final COMMIT (on the ext4
# exports that includes the disk, and a server that defers writeback to COMMIT pays it there).
#
#   scripts/bench-streams.sh [--rounds N] [--size SIZE] [--out DIR]
#
# Writes DIR/table.md, DIR/results.tsv and DIR/command.txt (default
# docs/benchmarks/streams-YYYY-MM-DD). The binary is $EAGERNFS_BIN if set, else a release
# build. Needs iperf3 and nfs-ganesha (scripts/install-deps.sh installs both).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/streams-$(date +%Y-%m-%d)
size=1GiB
rounds=5
orig_args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-streams: unknown argument $1" >&2; exit 2 ;;
    esac
done
[[ "$rounds" =~ ^[1-9][0-9]*$ ]] || { echo "bench-streams: --rounds must be a positive integer" >&2; exit 2; }
log() { echo "bench-streams: $*" >&2; }
command -v iperf3 >/dev/null || { echo "bench-streams: iperf3 is missing (scripts/install-deps.sh)" >&2; exit 1; }
bin=${EAGERNFS_BIN:-}
if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi
work=$(mktemp -d /var/tmp/eagernfs-streams.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null || true; done
    GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out" "$work/dir" "$work/gdir"

base=$((20000 + RANDOM % 20000))
# serve NAME PORT ARGS...: an eagernfs server on CPU 1, waited for.
serve() {
    local name=$1 port=$2
    shift 2
    mkdir -p "$work/state-$name"
    taskset -c 1 "$bin" serve "$@" --listen "127.0.0.1:$port" --state-dir "$work/state-$name" \
        -o rw,no_root_squash,insecure >"$work/$name.out" 2>"$work/$name.log" &
    pids+=($!)
    until grep -q "listening on" "$work/$name.out" 2>/dev/null; do
        kill -0 "${pids[-1]}" 2>/dev/null || { cat "$work/$name.log" >&2; exit 1; }
        sleep 0.1
    done
}
serve eagernfs "$base" "$work/dir" --splice always
serve eagernfs-copied "$((base + 1))" "$work/dir"
serve eagernfs-mem "$((base + 2))" /mem --memory --memory-size-mib 4096
GANESHA_RUN_DIR=$work/ganesha taskset -c 1 "$repo/scripts/ganesha.sh" start "$work/gdir" "$((base + 3))" vfs >/dev/null
targets=(
    "eagernfs --splice always|nfs://127.0.0.1:$base$work/dir"
    "eagernfs (loopback: copied)|nfs://127.0.0.1:$((base + 1))$work/dir"
    "eagernfs --memory|nfs://127.0.0.1:$((base + 2))/mem"
    "ganesha-vfs|nfs://127.0.0.1:$((base + 3))$work/gdir?mountport=$((base + 4))"
)

stream() { # URL DIRECTION FILE -> "MB/s to the last reply<TAB>MB/s with the final COMMIT"
    taskset -c 0 "$bin" bench stream "$1" --direction "$2" --size "$size" --rpc-size 1MiB --in-flight 8 \
        --file "$3" --no-progress 2>&1 |
        sed -n 's/^ *MB\/s *\([0-9.]*\) to the last reply\( · \([0-9.]*\) with COMMIT\)\{0,1\}.*/\1\t\3/p'
}
# One iperf3 server for the whole run, on the server's CPU.
iperf_port=$((base + 10))
taskset -c 1 iperf3 -s -p "$iperf_port" >"$work/iperf-server.log" 2>&1 &
pids+=($!)
iperf() { # [-R] -> MB/s received
    local tries=0
    until taskset -c 0 iperf3 -c 127.0.0.1 -p "$iperf_port" -t 3 -J "$@" >"$work/iperf.json" 2>/dev/null; do
        tries=$((tries + 1))
        [ "$tries" -lt 50 ] || { log "iperf3 failed: $(tail -3 "$work/iperf-server.log")"; return 1; }
        sleep 0.1
    done
    python3 -c 'import json,sys; print("%.1f" % (json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"] / 8e6))' "$work/iperf.json"
}

# The files, written once before the rounds (eagernfs and eagernfs --no-splice share the
# export): the one every round reads, and the one every round overwrites (so no round pays for
# allocating a new file).
for t in "${targets[@]}"; do
    name=${t%%|*} url=${t#*|}
    [ "$name" = "eagernfs (loopback: copied)" ] || stream "$url" write stream.dat >/dev/null
    stream "$url" write w.dat >/dev/null
done

: >"$out/results.tsv"
for r in $(seq 1 "$rounds"); do
    echo -e "$r\tiperf3 -R (server sends)\tread\t$(iperf -R)" >>"$out/results.tsv"
    echo -e "$r\tiperf3 (client sends)\twrite\t$(iperf)" >>"$out/results.tsv"
    for t in "${targets[@]}"; do
        name=${t%%|*} url=${t#*|}
        echo -e "$r\t$name\tread\t$(stream "$url" read stream.dat | cut -f1)" >>"$out/results.tsv"
        w=$(stream "$url" write w.dat)
        echo -e "$r\t$name\twrite\t${w%%$'\t'*}" >>"$out/results.tsv"
        echo -e "$r\t$name\twrite + COMMIT\t${w#*$'\t'}" >>"$out/results.tsv"
    done
    log "round $r of $rounds done"
done

{
    echo "# Streams against the loopback ceiling, $(date +%Y-%m-%d)"
    echo
    echo "\`scripts/bench-streams.sh ${orig_args[*]}\` ($(git -C "$repo" rev-parse --short HEAD)): $size per stream,"
    echo "1 MiB RPCs, 8 in flight, server on CPU 1, client on CPU 0; $rounds rounds, each measuring every row"
    echo "once in this order; medians (MB/s = 10^6 bytes/s). Ceiling: iperf3 over the same loopback in"
    echo "the same rounds (READ against \`-R\`, the server sending; WRITE against the client sending)."
    echo 'READs come from the server'"'"'s page cache. `write` is timed to the last WRITE reply, `write + COMMIT`'
    echo 'to the reply of the COMMIT that follows it, so it includes putting the data on disk (ext4).'
    echo
    python3 - "$out/results.tsv" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
med = {}
order = []
for _, name, d, v in rows:
    if (name, d) not in med:
        med[(name, d)] = []
        order.append((name, d))
    if v:
        med[(name, d)].append(float(v))
ceil = {"read": statistics.median(med[("iperf3 -R (server sends)", "read")]),
        "write": statistics.median(med[("iperf3 (client sends)", "write")])}
ceil["write + COMMIT"] = ceil["write"]
print("| target | direction | median MB/s | min–max | of the ceiling |")
print("| --- | --- | ---: | ---: | ---: |")
for name, d in order:
    v = med[(name, d)]
    if not v:
        print(f"| {name} | {d} | failed | | |")
        continue
    m = statistics.median(v)
    print(f"| {name} | {d} | {m:.0f} | {min(v):.0f}–{max(v):.0f} | {100 * m / ceil[d]:.0f} % |")
PY
} >"$out/table.md"
echo "scripts/bench-streams.sh ${orig_args[*]}" >"$out/command.txt"
cat "$out/table.md"
