#!/usr/bin/env bash
# What durable metadata costs (issue 35): untar and rm -r of a tree through `eagernfs mount`, and
# the SFS call mix (`eagernfs bench load`), against, side by side:
#   before        the server before issue 35 (--before BIN): changes of names and attributes
#                 answered before they are on disk
#   sync          the honest default: each change synced before its reply (one ext4 journal
#                 commit per group of concurrent changes)
#   journal-disk  `--journal` on the export's own file system: changes answered once logged
#   journal-shm   `--journal` on /dev/shm (a stand-in for an NVMe or NVRAM log device)
#   async         an `async` export: nothing synced
#   ganesha       nfs-ganesha 4.3 (FSAL VFS), which does not sync metadata either
#   before-MODE   the --before binary in one of the modes above (before-journal-shm,
#                 before-async, …): a change measured against the code before it, same run
# Every export is on one ext4 file system (with its journal, as a server's is; this VM's root file
# system has none) on a loop device over an image file in /var/tmp, written with direct I/O: the
# machine's disk, every flush reaching it. Pinned: clients and mounts on CPU 0, servers on CPU 1.
# Rounds alternate: each round runs every target once, and the order turns each round.
#
#   scripts/bench-metadata.sh [--out DIR] [--rounds N] [--tree DIR] [--before BIN]
#                             [--targets "before sync journal-disk journal-shm async ganesha"]
#                             [--load-seconds S] [--clients N] [--no-load] [--image-gib N]
#
# The SFS mix runs closed-loop: N clients (default 64) each with one call in flight for S seconds
# (default 10), so the result is the calls per second each server sustains, with their latency
# (an open-loop knee at p99 < 10 ms is not measurable on a shared 2-CPU VM: every server's p99
# there is near 10 ms at 500 calls/s).
#
# Writes DIR/results.tsv (target, round, step, seconds), DIR/load-TARGET-rN.json.gz (the load
# reports), DIR/table.md (medians, ranges, ratios, the call-rate knees) and DIR/command.txt.
# Default DIR: docs/benchmarks/metadata-YYYY-MM-DD. The tree is /usr/include unless --tree is
# given. The binary is $EAGERNFS_BIN if set, else a release build. Needs root, fuse3, nfs-ganesha
# (scripts/install-deps.sh) and loop devices.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/metadata-$(date +%Y-%m-%d)
rounds=3
tree=/usr/include
before_bin=
targets="sync journal-disk journal-shm async ganesha"
load_seconds=10
clients=64
load=1
image_gib=4
orig_args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --tree) tree=$2; shift 2 ;;
        --before) before_bin=$(realpath "$2"); targets="before $targets"; shift 2 ;;
        --targets) targets=$2; shift 2 ;;
        --load-seconds) load_seconds=$2; shift 2 ;;
        --no-load) load=0; shift ;;
        --clients) clients=$2; shift 2 ;;
        --image-gib) image_gib=$2; shift 2 ;;
        -h | --help) sed -n '2,32p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-metadata: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "bench-metadata: $*" >&2; }
. "$repo/scripts/lib/mounts.sh"
if [[ " $targets " == *" before "* ]] && [ -z "$before_bin" ]; then
    log "the target 'before' needs --before BIN"
    exit 2
fi
bin=${EAGERNFS_BIN:-}
if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi

work=$(mktemp -d /var/tmp/eagernfs-benchmeta.XXXXXX)
chmod 755 "$work"
shm_journal=$(mktemp -d /dev/shm/eagernfs-benchmeta.XXXXXX)
loopdev=
declare -A pid url mount_url
cleanup() {
    local unmounted=0
    unmount_all "$work" "$bin" && unmounted=1
    for p in "${pid[@]}"; do
        kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null || true
    done
    GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1 || true
    if [ -n "$loopdev" ]; then
        umount "$work/disk" 2>/dev/null || umount -l "$work/disk" 2>/dev/null || true
        losetup -d "$loopdev" 2>/dev/null || true
    fi
    rm -rf "$shm_journal"
    if [ "$unmounted" = 1 ] && ! mountpoint -q "$work/disk"; then rm -rf "$work"; fi
}
trap cleanup EXIT
mkdir -p "$out"

# ---- the disk and the tree ---------------------------------------------------------------------
pack_tree "$tree" "$work"
truncate -s "${image_gib}G" "$work/disk.img"
# Everything initialised now: no lazy-init thread writing while the steps are timed.
mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$work/disk.img"
loopdev=$(losetup --find --show --direct-io=on "$work/disk.img")
mkdir -p "$work/disk"
mount "$loopdev" "$work/disk"
log "exports on ext4 on $loopdev (direct I/O to $work/disk.img)"

# ---- the servers -------------------------------------------------------------------------------
port=$((20000 + RANDOM % 20000))
i=0
for t in $targets; do
    i=$((i + 2))
    p=$((port + i * 2))
    export_dir=$work/disk/export-$t
    mkdir -p "$export_dir" "$work/state-$t" "$work/mnt-$t"
    chmod 777 "$export_dir"
    opts=rw,insecure,no_root_squash
    extra=()
    server=$bin
    mode=$t
    case $t in
        before) server=$before_bin mode=sync ;;
        before-*) server=$before_bin mode=${t#before-} ;;
    esac
    if [ "$server" != "$bin" ] && [ -z "$server" ]; then
        echo "bench-metadata: target $t needs --before BIN" >&2
        exit 2
    fi
    case $mode in
        sync) ;;
        journal-disk) extra=(--journal "$work/disk/journal-$t") ;;
        journal-shm) extra=(--journal "$shm_journal/journal-$t") ;;
        async) opts=$opts,async ;;
        ganesha)
            url[$t]=$(GANESHA_RUN_DIR=$work/ganesha taskset -c 1 "$repo/scripts/ganesha.sh" start "$export_dir" "$p")
            mount_url[$t]=${url[$t]}
            log "ganesha at ${url[$t]}"
            continue
            ;;
    esac
    taskset -c 1 "$server" serve "$export_dir" --listen "127.0.0.1:$p" --state-dir "$work/state-$t" -o "$opts" \
        "${extra[@]}" >"$work/state-$t/server.out" 2>"$work/state-$t/server.log" &
    pid[$t]=$!
    until grep -q "listening on" "$work/state-$t/server.out" 2>/dev/null; do
        kill -0 "${pid[$t]}" 2>/dev/null || { cat "$work/state-$t/server.log" >&2; exit 1; }
        sleep 0.1
    done
    url[$t]="nfs://127.0.0.1:$p$export_dir?mountport=$p"
    mount_url[$t]="nfs://127.0.0.1:$p$export_dir"
    log "$t: $(grep -o 'changes of names.*' "$work/state-$t/server.log" | head -1 || true)"
done

do_mount() { taskset -c 0 "$bin" mount "${mount_url[$1]}" "$work/mnt-$1"; }
do_umount() { "$bin" umount "$work/mnt-$1"; }
: >"$work/results.tsv"
now() { date +%s.%N; }
step() { # target round name command...
    local target=$1 round=$2 name=$3 t0 t1 secs
    shift 3
    t0=$(now)
    taskset -c 0 "$@" >/dev/null
    t1=$(now)
    secs=$(echo "$t1 - $t0" | bc)
    log "round $round $target $name: ${secs} s"
    echo -e "$target\t$round\t$name\t$secs" >>"$work/results.tsv"
}

run_round() { # target round
    local t=$1 r=$2 d=$work/mnt-$1
    do_mount "$t"
    # Done when the data is on the disk: every NFS close sends it FILE_SYNC (sync -f reaches no
    # further than the mount; the async target's data is in the server's page cache).
    step "$t" "$r" untar sh -c "tar -xf '$work/tree.tar' -C '$d' && sync -f '$d'"
    do_umount "$t"
    do_mount "$t"
    step "$t" "$r" rm-r rm -rf "$d/$(basename "$tree")"
    do_umount "$t"
    [ "$load" = 1 ] || return 0
    log "round $r $t: bench load"
    taskset -c 0 "$bin" bench load "${url[$t]}" --clients "$clients" --closed-loop 1 --step-seconds "$load_seconds" \
        --no-progress --json "$out/load-$t-r$r.json.gz" >"$work/load-$t-r$r.txt" 2>&1 ||
        log "$t: bench load failed: $(tail -3 "$work/load-$t-r$r.txt")"
}

read -r -a order <<<"$targets"
for r in $(seq 1 "$rounds"); do
    for t in "${order[@]}"; do
        run_round "$t" "$r"
    done
    order=("${order[@]:1}" "${order[0]}")
done
cp "$work/results.tsv" "$out/results.tsv"
{
    echo "scripts/bench-metadata.sh ${orig_args[*]}"
    echo "# $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) CPUs, $(uname -r), load after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# tree: $tree, $files files, $dirs directories; ext4 image ${image_gib} GiB on $(df --output=source "$work" | tail -1)"
    echo "# eagernfs $("$bin" --version)${before_bin:+; before: $("$before_bin" --version)}"
    [ "$load" = 1 ] && echo "# bench load --clients $clients --closed-loop 1 --step-seconds $load_seconds"
    for t in $targets; do echo "# $t: ${url[$t]}"; done
} >"$out/command.txt"

python3 - "$out" "$files" "$targets" <<'EOF' | tee "$out/table.md"
import collections, gzip, json, os, statistics, sys
out, files, targets = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
secs = collections.defaultdict(list)
for line in open(f"{out}/results.tsv"):
    t, r, step, s = line.split("\t")
    secs[(t, step)].append(float(s))
med = lambda v: statistics.median(v) if v else float("nan")
print(f"Seconds, median of the rounds (range); {files} files in the tree.\n")
print("| step | " + " | ".join(targets) + " |")
print("|---|" + "---:|" * len(targets))
for step in ("untar", "rm-r"):
    cells = [f"{med(secs[(t, step)]):.2f} s ({min(secs[(t, step)]):.2f}–{max(secs[(t, step)]):.2f})" if secs[(t, step)] else "–" for t in targets]
    print(f"| {step} | " + " | ".join(cells) + " |")
pairs = [("journal-shm", "async"), ("journal-disk", "async"), ("sync", "async"), ("sync", "before"),
         ("sync", "ganesha"), ("journal-disk", "before"), ("journal-disk", "ganesha"), ("journal-shm", "ganesha"),
         ("before", "ganesha")]
print("\nRatios of the medians (time, lower is faster):\n")
print("| step | " + " | ".join(f"{a} / {b}" for a, b in pairs if a in targets and b in targets) + " |")
print("|---|" + "---:|" * sum(1 for a, b in pairs if a in targets and b in targets))
for step in ("untar", "rm-r"):
    cells = [f"{med(secs[(a, step)]) / med(secs[(b, step)]):.2f}×" for a, b in pairs if a in targets and b in targets]
    print(f"| {step} | " + " | ".join(cells) + " |")
# The SFS mix, closed loop: calls per second sustained, and latency, per round.
rates = collections.defaultdict(list)
p50s = collections.defaultdict(list)
p99s = collections.defaultdict(list)
for t in targets:
    for f in sorted(os.listdir(out)):
        if not (f.startswith(f"load-{t}-r") and f.endswith(".json.gz")):
            continue
        rep = json.load(gzip.open(f"{out}/{f}"))
        for s in rep["steps"]:
            if s["errors"]:
                continue
            rates[t].append(s["achieved_ops_per_s"] or 0)
            lat = s.get("latency") or {}
            p50s[t].append(lat.get("p50_ns", 0) / 1e6)
            p99s[t].append(lat.get("p99_ns", 0) / 1e6)
if rates:
    print("\nSFS mix (`bench load`, closed loop): calls per second sustained, median of the rounds (range); latency p50 / p99 ms (medians):\n")
    print("| | " + " | ".join(targets) + " |")
    print("|---|" + "---:|" * len(targets))
    print("| calls/s | " + " | ".join(f"{med(rates[t]):,.0f} ({min(rates[t]):,.0f}–{max(rates[t]):,.0f})" if rates[t] else "–" for t in targets) + " |")
    print("| p50 / p99 ms | " + " | ".join(f"{med(p50s[t]):.2f} / {med(p99s[t]):.2f}" if rates[t] else "–" for t in targets) + " |")
    print("\nRatios of the median rates (higher is faster):\n")
    for a, b in pairs:
        if rates.get(a) and rates.get(b):
            print(f"- {a} / {b}: {med(rates[a]) / med(rates[b]):.2f}×")
EOF
log "wrote $out/table.md, $out/results.tsv, $out/command.txt"
