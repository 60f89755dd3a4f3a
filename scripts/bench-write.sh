#!/usr/bin/env bash
# Lever & Honeyman's sequential write benchmark (USENIX FREENIX 2002) against one or more
# directories, with the paper's figures. For each target LABEL=DIR it runs
#   1. a sweep over file sizes (Fig. 1 and 7: throughput vs file size), and
#   2. one 40 MB run keeping every write()'s latency (Fig. 2: latency per call; Fig. 5:
#      latency histogram),
# then draws every target on one chart and, with two or more targets, prints a Markdown ratio
# table of the first two (first / second).
#
#   scripts/bench-write.sh [--out DIR] [--sizes LIST] [--calls-size SIZE] [--block SIZE]
#                          [--max-seconds S] LABEL=DIR [LABEL=DIR ...]
#
#   --out DIR          where reports, plots and table.md go     (default docs/benchmarks/write)
#   --sizes LIST       sweep sizes, comma-separated              (default: the paper's 25..450 MB)
#   --calls-size SIZE  file size of the per-call latency run     (default 40MB, as Fig. 2)
#   --block SIZE       bytes per write()                         (default 8KiB, as the paper)
#   --max-seconds S    bound on each bench command's write loops (default 600)
#
# Reports are saved gzip-compressed (LABEL-sweep.json.gz, LABEL-calls.json.gz: the per-call
# latencies are most of the bytes); plots and table.md stay plain. `zcat F.json.gz | jq .`
# reads one. The benchmark binary is $BENCH_BIN if set, else the crate's example built here in
# release mode. Example: scripts/bench-write.sh ext4=/var/tmp tmpfs=/dev/shm
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/write
sizes=""
calls_size=40MB
block=8KiB
max_seconds=600
targets=()

while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --sizes) sizes=$2; shift 2 ;;
        --calls-size) calls_size=$2; shift 2 ;;
        --block) block=$2; shift 2 ;;
        --max-seconds) max_seconds=$2; shift 2 ;;
        -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *=*) targets+=("$1"); shift ;;
        *) echo "bench-write: unknown argument $1 (targets are LABEL=DIR)" >&2; exit 2 ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || { echo "bench-write: give at least one LABEL=DIR target" >&2; exit 2; }

log() { echo "bench-write: $*" >&2; }

bench=${BENCH_BIN:-}
if [ -z "$bench" ]; then
    log "building the benchmark (release)"
    (cd "$repo" && cargo build --release -q -p eagernfs-bench --example bench >&2)
    bench=${CARGO_TARGET_DIR:-$repo/target}/release/examples/bench
fi

sweep_args=(--sweep)
[ -n "$sizes" ] && sweep_args=(--sizes "$sizes")

mkdir -p "$out"
sweeps=()
calls=()
labels=()
for target in "${targets[@]}"; do
    label=${target%%=*}
    dir=${target#*=}
    [ -d "$dir" ] || { log "$dir is not a directory"; exit 2; }
    log "$label: sweep in $dir"
    "$bench" write "$dir" "${sweep_args[@]}" --block "$block" --max-seconds "$max_seconds" \
        --label "$label" --no-latencies --json "$out/$label-sweep.json.gz" --plot "$out/$label-sweep"
    log "$label: per-call latencies, $calls_size"
    "$bench" write "$dir" --size "$calls_size" --block "$block" --max-seconds "$max_seconds" \
        --label "$label" --json "$out/$label-calls.json.gz" --plot "$out/$label-calls"
    sweeps+=("$out/$label-sweep.json.gz")
    calls+=("$out/$label-calls.json.gz")
    labels+=("$label")
done

for metric in writes fsync close; do
    "$bench" plot --kind throughput --metric "$metric" -o "$out/throughput-$metric" "${sweeps[@]}"
done
"$bench" plot --kind histogram -o "$out/histogram" "${calls[@]}"

if [ ${#labels[@]} -ge 2 ]; then
    names="${labels[0]},${labels[1]}"
    {
        "$bench" table "${sweeps[0]}" "${sweeps[1]}" --names "$names"
        echo
        "$bench" table "${calls[0]}" "${calls[1]}" --names "$names"
    } | tee "$out/table.md"
fi
log "results in $out"
