#!/usr/bin/env bash
# NFSv4.1 against NFSv3 and against nfs-ganesha's NFSv4.1: the SFS-style call-rate test
# (`eagernfs bench load`, SPEC SFS 3.0 mix) at the same offered rates against
#   eagernfs-v3    eagernfs serving a local directory, NFSv3
#   eagernfs-v41   the same server, NFSv4.1 (`vers=4.1`)
#   ganesha-v41    nfs-ganesha 4.3 (FSAL VFS), NFSv4.1
#   ganesha-v3     nfs-ganesha 4.3, NFSv3 (for context)
#   before-v3      (--before BIN) an older eagernfs server, NFSv3
#   before-v41     (--before BIN) the older server, NFSv4.1
# each on a fresh directory and a fresh server pinned to CPU 1, the generator pinned to CPU 0.
# The knee is the highest offered rate the server keeps up with (achieved >= 95 % of offered,
# no errors) at a p99 latency under 10 ms.
#
#   scripts/bench-nfs4.sh [--out DIR] [--rates LIST] [--clients N] [--step-seconds S] [--rounds R]
#                         [--before BIN] [--targets "eagernfs-v3 eagernfs-v41 ganesha-v41 ganesha-v3"]
#
# With --before BIN the older server serves the before-* targets (added to the default list);
# the generator is this build's (or $EAGERNFS_BIN) for every target, so only the server differs.
# --targets picks targets and their order (of the six above).
# With --rounds R (default 3) every target is measured R times, the order of the targets
# reversed every other round (so a busy machine hurts all alike), and the median knee counts.
# Writes DIR/table.md (per round and rate: achieved and p99 per target; median knees and
# ratios), DIR/TARGET-rN.json.gz (the load reports) and DIR/command.txt.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/nfs4-$(date +%Y-%m-%d)
rates=8000,12500,15625,19531,24414,30518,38147,47684,59605
clients=64
step=5
rounds=3
before_bin=
targets_arg=
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --rates) rates=$2; shift 2 ;;
        --clients) clients=$2; shift 2 ;;
        --step-seconds) step=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --before) before_bin=$(realpath "$2"); shift 2 ;;
        --targets) targets_arg=$2; shift 2 ;;
        -h | --help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-nfs4: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "bench-nfs4: $*" >&2; }
all_targets="eagernfs-v3 eagernfs-v41 ganesha-v41 ganesha-v3 before-v3 before-v41"
target_names=${targets_arg:-eagernfs-v3 eagernfs-v41 ganesha-v41 ganesha-v3${before_bin:+ before-v3 before-v41}}
for t in $target_names; do
    [[ " $all_targets " == *" $t "* ]] || { log "unknown target $t (known: $all_targets)"; exit 2; }
    if [[ $t == before-* ]] && [ -z "$before_bin" ]; then log "the target $t needs --before BIN"; exit 2; fi
done
bin=${EAGERNFS_BIN:-}
if [ -z "$bin" ]; then
    log "building eagernfs (release)"
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi
mkdir -p "$out"
work=$(mktemp -d /var/tmp/eagernfs-nfs4.XXXXXX)
pid=""
stop_server() {
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        pid=""
    fi
    GANESHA_RUN_DIR="$work/ganesha" "$repo/scripts/ganesha.sh" stop 2>/dev/null || true
}
trap 'stop_server; rm -rf "$work"' EXIT
echo "scripts/bench-nfs4.sh --rates $rates --clients $clients --step-seconds $step --rounds $rounds${before_bin:+ --before $before_bin} --targets '$target_names'" >"$out/command.txt"
echo "# $("$bin" --version)${before_bin:+; before: $("$before_bin" --version)}" >>"$out/command.txt"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/command.txt"

run() {
    local name="$1-r$4" kind=$2 vers=$3 dir port url
    dir="$work/$name"
    mkdir -p "$dir"
    chmod 1777 "$dir"
    port=$((20000 + RANDOM % 40000))
    case "$kind" in
        eagernfs | before)
            local server=$bin
            [ "$kind" = before ] && server=$before_bin
            taskset -c 1 "$server" serve "$dir" --listen "127.0.0.1:$port" --state-dir "$work/state-$name" \
                -o rw,insecure,no_root_squash >"$work/$name.log" 2>&1 &
            pid=$!
            for _ in $(seq 100); do grep -q "listening on" "$work/$name.log" && break; sleep 0.1; done
            url="nfs://127.0.0.1:$port$dir?mountport=$port"
            ;;
        ganesha)
            GANESHA_RUN_DIR="$work/ganesha" GANESHA_NFS4=1 taskset -c 1 "$repo/scripts/ganesha.sh" start "$dir" "$port" vfs >/dev/null
            url="nfs://127.0.0.1:$port$dir?mountport=$((port + 1))"
            ;;
    esac
    [ "$vers" = 4.1 ] && url="$url&vers=4.1"
    log "$name: $url"
    echo "taskset -c 0 $bin bench load '$url' --clients $clients --rates $rates --step-seconds $step --json $name.json.gz" >>"$out/command.txt"
    taskset -c 0 "$bin" bench load "$url" --clients "$clients" --rates "$rates" --step-seconds "$step" \
        --no-progress --json "$out/$name.json.gz" >"$out/$name.txt" 2>&1 || log "$name: bench load failed: $(tail -3 "$out/$name.txt")"
    stop_server
}

targets=()
for t in $target_names; do
    vers=${t##*-v}
    [ "$vers" = 41 ] && vers=4.1
    targets+=("$t ${t%-v*} $vers")
done
for round in $(seq "$rounds"); do
    order=("${targets[@]}")
    if [ $((round % 2)) = 0 ]; then
        order=()
        for ((i = ${#targets[@]} - 1; i >= 0; i--)); do order+=("${targets[$i]}"); done
    fi
    for t in "${order[@]}"; do
        # shellcheck disable=SC2086
        run $t "$round"
    done
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/command.txt"

# shellcheck disable=SC2086
python3 - "$out" "$rounds" $target_names >"$out/table.md" <<'PY'
import gzip, json, os, statistics, sys
out, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
knees = {n: [] for n in names}
sat = {n: [] for n in names}
low = {n: [] for n in names}
for rnd in range(1, rounds + 1):
    rows = {}
    for n in names:
        p = os.path.join(out, f"{n}-r{rnd}.json.gz")
        if not os.path.exists(p):
            continue
        r = json.load(gzip.open(p))
        knee = 0
        for i, s in enumerate(r["steps"]):
            offered = s["offered_ops_per_s"] or 0
            achieved = s["achieved_ops_per_s"] or 0
            p99 = (s.get("latency") or {}).get("p99_ns", 0) / 1e6
            rows.setdefault(round(offered), {})[n] = (achieved, p99, s["errors"])
            if achieved >= 0.95 * offered and p99 < 10 and s["errors"] == 0:
                knee = max(knee, offered)
            if i == 0:
                low[n].append(((s.get("latency") or {}).get("p50_ns", 0) / 1e3, p99 * 1e3))
        knees[n].append(knee)
        sat[n].append(max((s["achieved_ops_per_s"] or 0) for s in r["steps"]) if r["steps"] else 0)
    print(f"## Round {rnd}\n")
    print("| offered/s | " + " | ".join(f"{n} achieved/s (p99 ms)" for n in names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for rate in sorted(rows):
        cells = []
        for n in names:
            a = rows[rate].get(n)
            cells.append("-" if a is None else f"{a[0]:,.0f} ({a[1]:.2f}){' err ' + str(a[2]) if a[2] else ''}")
        print(f"| {rate:,} | " + " | ".join(cells) + " |")
    print()
print("## Knees and saturation\n")
print("Knee: the highest offered rate kept up with (achieved >= 95 %, no errors) at p99 < 10 ms. "
      "Saturation: the most calls/s achieved at any rate. Per round, and the median; "
      "p50 and p99 at the lowest rate (µs), medians of the rounds.\n")
k, m = {}, {}
for n in names:
    k[n] = statistics.median(knees[n]) if knees[n] else 0
    m[n] = statistics.median(sat[n]) if sat[n] else 0
    p50 = statistics.median(x[0] for x in low[n]) if low[n] else 0
    p99 = statistics.median(x[1] for x in low[n]) if low[n] else 0
    print(f"- {n}: knee {', '.join(f'{x:,.0f}' for x in knees[n])}; median {k[n]:,.0f}/s. "
          f"Saturation {', '.join(f'{x:,.0f}' for x in sat[n])}; median {m[n]:,.0f}/s. "
          f"Lowest rate p50 {p50:,.0f} µs, p99 {p99:,.0f} µs")
def ratio(d, a, b):
    return f"{d[a] / d[b]:.2f}x" if d.get(a) and d.get(b) else "n/a (a median of 0)"
print()
for a, b in [("eagernfs-v41", "ganesha-v41"), ("eagernfs-v41", "eagernfs-v3"), ("eagernfs-v3", "ganesha-v3"),
             ("eagernfs-v3", "before-v3"), ("eagernfs-v41", "before-v41")]:
    if a in names and b in names:
        print(f"- {a} / {b}: knee {ratio(k, a, b)}, saturation {ratio(m, a, b)}")
PY
cat "$out/table.md"
