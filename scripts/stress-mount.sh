#!/usr/bin/env bash
# The mount under concurrency and mmap, at the length issue 22 asks for (CI runs shorter versions
# of both in crates/cli/tests/fuse_concurrency.rs):
#   1. tests/clients/fsx.c with mapped reads and writes, RUNS runs of OPS operations each (files up
#      to 10 MB, operations up to 200 KB), two at a time;
#   2. fio: four writers (O_DIRECT, buffered, splice, mmap) and six readers (four O_DIRECT, two
#      buffered) on the same four files for SECONDS; no job may report an error.
# Through `eagernfs mount` (default options: NFSv4.2; `--options vers=3` for NFSv3) of
# `eagernfs serve` on a fresh directory, both started here. Prints one line per fsx run and a
# summary; exit 1 if anything failed.
#
#   scripts/stress-mount.sh [--runs N] [--ops N] [--seconds N] [--options MOUNT_OPTIONS]
#
# The binary is $EAGERNFS_BIN if set, else target/release/eagernfs (built if missing). Needs
# root, fuse3, fio and a C compiler (scripts/install-deps.sh installs them).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
runs=20
ops=100000
seconds=60
options=
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs=$2; shift 2 ;;
        --ops) ops=$2; shift 2 ;;
        --seconds) seconds=$2; shift 2 ;;
        --options) options=$2; shift 2 ;;
        -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "stress-mount: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "stress-mount: $*" >&2; }
bin=${EAGERNFS_BIN:-$repo/target/release/eagernfs}
[ -x "$bin" ] || (cd "$repo" && cargo build -q --release -p eagernfs >&2)
command -v fio >/dev/null || { log "needs fio (apt install fio)"; exit 1; }

work=$(mktemp -d /var/tmp/eagernfs-stress.XXXXXX)
chmod 755 "$work"
server_pid=
cleanup() {
    # Unmount before the server goes (a lazy unmount if something still uses the mount), and
    # never remove the work directory through a mount that is still there.
    "$bin" umount "$work/mnt" >/dev/null 2>&1 || "$bin" umount -z "$work/mnt" >/dev/null 2>&1 || true
    [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    mountpoint -q "$work/mnt" || rm -rf "$work"
}
trap cleanup EXIT

cc -O2 -Wall -o "$work/fsx" "$repo/tests/clients/fsx.c"
mkdir -p "$work/export" "$work/state" "$work/mnt"
port=$((20000 + RANDOM % 20000))
"$bin" serve "$work/export" --listen "127.0.0.1:$port" --state-dir "$work/state" -o rw,no_root_squash \
    >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
until grep -q "listening on" "$work/server.out" 2>/dev/null; do
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done
"$bin" mount "nfs://127.0.0.1:$port$work/export" "$work/mnt" ${options:+-o "$options"}

failed=0
base_seed=$(date +%s)
run_fsx() {
    local i=$1 seed=$((base_seed + $1))
    if "$work/fsx" -M -N "$ops" -l 10000000 -o 200000 -S "$seed" "$work/mnt/fsx$i" >"$work/fsx$i.log" 2>&1; then
        echo "fsx run $i (seed $seed): pass"
    else
        echo "fsx run $i (seed $seed): FAIL"
        sed 's/^/    /' "$work/fsx$i.log" | head -40
        return 1
    fi
}
i=0
while [ "$i" -lt "$runs" ]; do
    pids=()
    for j in 0 1; do
        [ $((i + j)) -lt "$runs" ] || continue
        run_fsx $((i + j)) &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
    i=$((i + 2))
done
fsx_failed=$failed

mkdir -p "$work/mnt/mix"
{
    printf '[global]\ndirectory=%s\nnrfiles=4\nfilename_format=f.$filenum\nfilesize=8m\n' "$work/mnt/mix"
    printf 'file_service_type=random\nbsrange=4k-64k\ntime_based=1\nruntime=%s\n\n' "$seconds"
    printf '[w-direct]\nrw=randwrite\nioengine=psync\ndirect=1\n\n[w-buffered]\nrw=randwrite\nioengine=psync\n\n'
    printf '[w-splice]\nrw=randwrite\nioengine=splice\n\n[w-mmap]\nrw=randwrite\nioengine=mmap\n\n'
    for r in 1 2 3 4; do printf '[r-direct-%s]\nrw=randread\nioengine=psync\ndirect=1\n\n' "$r"; done
    for r in 1 2; do printf '[r-buffered-%s]\nrw=randread\nioengine=psync\n\n' "$r"; done
} >"$work/mix.fio"
fio "$work/mix.fio" >"$work/fio.out" 2>&1 || true
jobs_ok=$(grep -c 'err= 0' "$work/fio.out" || true)
errors=$(grep -i 'error' "$work/fio.out" | grep -vc 'err= 0' || true)
echo "fio mix, $seconds s: $jobs_ok of 10 jobs without error, $errors error lines"
grep -E '^ +(read|write): IOPS' "$work/fio.out" | sed 's/^/    /' || true
if [ "$jobs_ok" -ne 10 ] || [ "$errors" -ne 0 ]; then
    grep -i 'error' "$work/fio.out" | head -20
    failed=$((failed + 1))
fi
echo "stress-mount: fsx $((runs - fsx_failed)) of $runs passed ($ops operations each, mmap on); fio mix $([ "$jobs_ok" -eq 10 ] && [ "$errors" -eq 0 ] && echo passed || echo FAILED)"
[ "$failed" -eq 0 ]
