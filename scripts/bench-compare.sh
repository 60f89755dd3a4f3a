#!/usr/bin/env bash
# eagernfs against nfs-ganesha on this machine: the same workloads (sequential WRITE and READ
# stream, the SFS-mix load generator at a few offered rates, a small mount storm) against
#   eagernfs-dir   eagernfs serving a local directory
#   eagernfs-mem   eagernfs --memory
#   ganesha-vfs    nfs-ganesha 4.3, FSAL VFS, on a local directory
#   ganesha-mem    nfs-ganesha 4.3, FSAL MEM
#   eagernfs-journal  with --journal: eagernfs serving a local directory with its intent journal
#                  (a file on the same disk), so COMMIT and stable WRITEs cost a journal append
# Servers are pinned to CPU 1 and the benchmark client to CPU 0 (taskset), so they do not
# take each other's core. Ganesha is restarted before each of its workloads (it wedges after
# ~24k creates; a fresh server also keeps one workload's leftovers out of the next).
#
#   scripts/bench-compare.sh [--out DIR] [--stream-size SIZE] [--load-rates LIST]
#                            [--load-step-seconds S] [--mountstorm-clients N] [--no-ganesha]
#                            [--journal]
#
#   --out DIR   where everything goes (default docs/benchmarks/compare-YYYY-MM-DD)
#   --journal   also measure eagernfs-journal (see above)
#   the rest are passed to `eagernfs bench compare` (see its --help).
#
# Writes DIR/table.md (ratio tables, eagernfs-dir first), DIR/*.json.gz (one gzip-compressed
# report per target and workload, and compare.json.gz holding them all; `zcat F | jq .`),
# DIR/*.{svg,png}, DIR/machine.md, DIR/command.txt, DIR/summary.txt.
# The binary is $EAGERNFS_BIN if set, else a release build made here.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/compare-$(date +%Y-%m-%d)
orig_args=("$@")
ganesha=1
journal=0
pass=()
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --no-ganesha) ganesha=0; shift ;;
        --journal) journal=1; shift ;;
        --stream-size | --load-rates | --load-step-seconds | --mountstorm-clients | --load-clients)
            pass+=("$1" "$2"); shift 2 ;;
        -h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-compare: unknown argument $1" >&2; exit 2 ;;
    esac
done

log() { echo "bench-compare: $*" >&2; }

bin=${EAGERNFS_BIN:-}
if [ -z "$bin" ]; then
    log "building eagernfs (release)"
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi

work=$(mktemp -d /var/tmp/eagernfs-compare.XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    if [ "$ganesha" = 1 ]; then
        GANESHA_RUN_DIR=$work/ganesha-vfs "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1 || true
        GANESHA_RUN_DIR=$work/ganesha-mem "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1 || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

# A free TCP port pair (ganesha needs PORT and PORT+1).
free_port() {
    python3 - <<'PY'
import socket
while True:
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    if p >= 65000: a.close(); continue
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 1)); print(p); break
    except OSError:
        pass
    finally:
        a.close(); b.close()
PY
}

wait_port() {
    local port=$1 i
    for i in $(seq 1 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.1
    done
    log "nothing listens on port $port"; tail -5 "$work"/*.log >&2 2>/dev/null; return 1
}

mkdir -p "$work/dir" "$work/jdir" "$work/gvfs" "$work/gmem" "$out"
targets=()
restarts=()

p=$(free_port)
# Each server has a state directory (handle key, control socket) of its own.
mkdir -p "$work/dstate" "$work/mstate"
taskset -c 1 "$bin" serve "$work/dir" --listen "127.0.0.1:$p" -o rw,no_root_squash,insecure \
    --state-dir "$work/dstate" >"$work/eagernfs-dir.log" 2>&1 &
pids+=($!)
wait_port "$p"
targets+=(--target "eagernfs-dir=nfs://127.0.0.1:$p$work/dir")

if [ "$journal" = 1 ]; then
    p=$(free_port)
    mkdir -p "$work/jstate"
    taskset -c 1 "$bin" serve "$work/jdir" --listen "127.0.0.1:$p" -o rw,no_root_squash,insecure \
        --journal "$work/journal" --state-dir "$work/jstate" >"$work/eagernfs-journal.log" 2>&1 &
    pids+=($!)
    wait_port "$p"
    targets+=(--target "eagernfs-journal=nfs://127.0.0.1:$p$work/jdir")
fi

p=$(free_port)
taskset -c 1 "$bin" serve --memory /mem --listen "127.0.0.1:$p" -o rw,no_root_squash,insecure \
    --state-dir "$work/mstate" >"$work/eagernfs-mem.log" 2>&1 &
pids+=($!)
wait_port "$p"
targets+=(--target "eagernfs-mem=nfs://127.0.0.1:$p/mem")

if [ "$ganesha" = 1 ]; then
    for fsal in vfs mem; do
        p=$(free_port)
        dir=$work/g$fsal
        start="GANESHA_RUN_DIR=$work/ganesha-$fsal taskset -c 1 $repo/scripts/ganesha.sh start $dir $p $fsal"
        sh -c "$start" >/dev/null
        targets+=(--target "ganesha-$fsal=nfs://127.0.0.1:$p$dir?mountport=$((p + 1))")
        restarts+=(--restart "ganesha-$fsal=$start")
    done
fi

cmd=(taskset -c 0 "$bin" bench compare "${targets[@]}" "${restarts[@]}" "${pass[@]}" --out "$out" --no-progress)
log "running: ${cmd[*]}"
"${cmd[@]}" | tee "$out/summary.txt"

{
    echo '```sh'
    echo "scripts/bench-compare.sh ${orig_args[*]}"
    echo '```'
    echo
    echo "which ran (temporary paths and ports differ per run):"
    echo
    echo '```sh'
    printf '%q ' "${cmd[@]}" | sed "s#$work#\$WORK#g"
    echo
    echo '```'
} >"$out/command.txt"

{
    echo "# Machine"
    echo
    echo '```'
    uname -a
    echo
    lscpu 2>/dev/null | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|CPU max MHz|L2|L3)' || true
    echo
    free -h 2>/dev/null | head -2 || true
    echo
    echo "eagernfs $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "ganesha: $(dpkg-query -W -f='${Version}' nfs-ganesha 2>/dev/null || echo 'not installed')"
    echo "local directory file system: $(df -T "$work" | awk 'NR==2 {print $2}')"
    echo '```'
} >"$out/machine.md"
log "wrote $out"
