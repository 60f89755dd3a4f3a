#!/usr/bin/env bash
# Everyday work through a mount (issue 18): untar a source tree, find, cat every file, rm -r, a
# 1 GiB dd each way, and a small C build with make -j2, on
#   ext4      the directory itself (the local ceiling),
#   bindfs    bindfs over a directory (FUSE with no network: the ceiling for any FUSE client),
#   floorfs   for the two dd steps only: scripts/floorfs with no round trips, a multithreaded
#             libfuse3 passthrough that, unlike Debian's bindfs, takes 1 MiB requests as the
#             mount does: what FUSE itself allows a large write or read, with no network,
#   eagernfs     `eagernfs mount -o vers=3` of `eagernfs serve` (NFSv3),
#   eagernfs-v4  `eagernfs mount` of the same server over NFSv4.2 (its default),
#   eagernfs-v4ra0 the same with `-o readahead_files=0` (no small files read ahead: the A/B of
#                  reading ahead, in the same binary),
#   eagernfs-v4wb  the same with `-o deleg_close=writeback` (a close under a write delegation
#                  returns before its write-back; its untar ends with `eagernfs sync`, so it
#                  pays the same durability as the others),
#   eagernfs-v4async the same with `-o dirops=async` (unlinks and rmdirs under a delegation of
#                  their directory return before their REMOVE is answered; an rm -r still
#                  returns with the tree gone from the server: each rmdir waits for its own),
#   eagernfs-v4local the same with `-o deleg_close=writeback,deleg_chmod=hold,dirops=async`
#                  (all a delegation allows: a close and a chmod under a write delegation wait
#                  for the write-back, removes under a directory's for nothing; its untar and
#                  cp -r end with `eagernfs sync`, as eagernfs-v4wb's),
#   ganesha      `eagernfs mount -o vers=3` of nfs-ganesha (FSAL VFS),
#   ganesha-v4   `eagernfs mount` of nfs-ganesha serving NFSv4 only (`Protocols = 4`),
# and, for the untar only, two floors that say where its time goes:
#   ext4-fsync      the same extraction straight onto ext4 (Python's tarfile) with each file
#                   fsync'ed before close: what "data on stable storage at close" costs the disk;
#   eagernfs-async  `eagernfs mount` of `eagernfs serve` with an `async` export (the server
#                   does not sync): the mount's and the network's share without the disk
#                   (NFSv3).
# All on the same file system, in alternating rounds, pinned: the workload and the mount (or
# bindfs) on CPU 0, the server on CPU 1; the order of targets turns each round. "After a
# remount" steps unmount and mount the FUSE targets first (the servers keep their page cache);
# before each 1 GiB dd every target drops the kernel's page cache and lets freed memory settle,
# so each reads from the disk and each writer starts from the same memory. The mount's own count of calls by NFS
# procedure (`eagernfs stat MOUNT`; over NFSv4, COMPOUNDs by their main operation: round trips
# either way) is taken for the NFS targets.
#
#   scripts/bench-mount.sh [--out DIR] [--rounds N]
#                          [--targets "ext4 ext4-fsync bindfs floorfs eagernfs eagernfs-v4 eagernfs-v4ra0 eagernfs-v4wb eagernfs-v4async eagernfs-v4local
#                                      eagernfs-async ganesha ganesha-v4"]
#                          [--tree DIR] [--dd-mib N] [--mount-options OPTS] [--before BIN]
#                          [--settle-untar SECONDS] [--server-args "ARGS"] [--loop-ext4 GIB]
#
# --server-args adds ARGS to `eagernfs serve` for the eagernfs targets (and `before`), e.g.
# "--journal /dev/shm/{state}.journal": metadata and data committed at log speed (issue 36);
# {state} becomes a name of this run's and that server's, so servers and runs never share a
# journal; the journals are removed when the run ends.
#
# `cp-r` copies the tree in with cp -r (no chmod after the data, as tar does), then syncs as
# the untar does: what `deleg_close=writeback` changes most (issue 36).
#
# After `cat` (a remount first, so it is cold), `cat-again` cats the same tree once more with
# no remount: over NFSv4 the mount holds read delegations of the files by then (issue 36).
#
# --settle-untar N syncs and waits N seconds before each untar: ext4's inode allocator skips
# inodes freed in the last 60 s (300 s more while their table block is dirty) when it allocates
# one (`recently_deleted`), at a cost that grows with the deletions before, so an untar that
# follows another target's rm -r closely pays for it (docs/benchmarks/mount-v4-2026-11-28).
#
# --loop-ext4 GIB runs everything on a new ext4 file system with a journal, made for the run on a
# loop device (a sparse GIB GiB image under /var/tmp), as a file server's would be: where the
# machine's own file system has no journal (/proc/fs/jbd2 lists none for it), ext4 checks for
# recently deleted inodes at every allocation (above), which a journal turns off, and which makes
# each round's untar slower than the last. Every target's directory, the servers' exports and
# bindfs's source are on it; the journals of --server-args stay where they are named.
#
# --before BIN adds the target `before`: BIN's server and mount, in the same rounds (an A/B of
# a change: build the old revision somewhere and name its binary).
#
# Writes DIR/results.tsv (one line per target, round and step: seconds, calls), DIR/table.md
# (medians and ranges, ratios to bindfs, calls per file) and DIR/mount.svg, and DIR/command.txt.
# Default DIR: docs/benchmarks/mount-YYYY-MM-DD. The tree is a copy of /usr/include unless
# --tree is given. The binary is $EAGERNFS_BIN if set, else a release build. Needs root, fuse3,
# bindfs, nfs-ganesha (scripts/install-deps.sh), make, a C compiler and libfuse3-dev (floorfs).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/mount-$(date +%Y-%m-%d)
rounds=3
targets="ext4 ext4-fsync bindfs floorfs eagernfs eagernfs-v4 eagernfs-async ganesha ganesha-v4"
tree=/usr/include
dd_mib=1024
mount_options=
before_bin=
settle_untar=0
server_args=
loop_gib=
orig_args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --targets) targets=$2; shift 2 ;;
        --tree) tree=$2; shift 2 ;;
        --dd-mib) dd_mib=$2; shift 2 ;;
        --mount-options) mount_options=$2; shift 2 ;;
        --settle-untar) settle_untar=$2; shift 2 ;;
        --server-args) server_args=$2; shift 2 ;;
        --loop-ext4) loop_gib=$2; shift 2 ;;
        --before) before_bin=$(realpath "$2"); targets="$targets before"; shift 2 ;;
        -h | --help) sed -n '2,52p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-mount: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "bench-mount: $*" >&2; }
. "$repo/scripts/lib/mounts.sh"
bin=${EAGERNFS_BIN:-}
if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi
for tool in bindfs make cc; do
    command -v "$tool" >/dev/null || { log "needs $tool (scripts/install-deps.sh)"; exit 1; }
done

work=$(mktemp -d /var/tmp/eagernfs-benchmount.XXXXXX)
image=
if [ -n "$loop_gib" ]; then
    case "$loop_gib" in *[!0-9]* | '' | 0) log "--loop-ext4 takes a whole number of GiB, e.g. 8"; exit 2 ;; esac
    command -v mkfs.ext4 >/dev/null || { log "--loop-ext4 needs mkfs.ext4 (apt install e2fsprogs)"; exit 1; }
    image=$work.img
    truncate -s "${loop_gib}G" "$image"
    mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$image"
    mount -o loop "$image" "$work" || { log "cannot mount a loop device (needs root and /dev/loop-control)"; rm -f "$image"; exit 1; }
fi
chmod 755 "$work"
server_pid=
async_pid=
before_pid=
journals=()
cleanup() {
    local unmounted=0
    unmount_all "$work" "$bin" && unmounted=1
    for p in $server_pid $async_pid $before_pid; do
        kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null || true
    done
    GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1 || true
    GANESHA_RUN_DIR=$work/ganesha-v4 "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1 || true
    for j in "${journals[@]}"; do
        rm -f "$j"
    done
    # Never remove the work directory through a mount that is still there.
    if [ "$unmounted" = 1 ]; then
        if [ -n "$image" ]; then
            umount "$work" && rm -f "$image" && rmdir "$work"
        else
            rm -rf "$work"
        fi
    fi
}
trap cleanup EXIT
mkdir -p "$out"

# ---- the inputs --------------------------------------------------------------------------------
pack_tree "$tree" "$work"
# A small C project: 48 files, a header each includes, one program.
mkdir -p "$work/proj"
{
    echo 'CFLAGS = -O1 -g'
    echo 'SRC = $(wildcard *.c)'
    echo 'prog: $(SRC:.c=.o)'
    printf '\t$(CC) -o $@ $^\n'
    echo '%.o: %.c common.h'
    printf '\t$(CC) $(CFLAGS) -c -o $@ $<\n'
} >"$work/proj/Makefile"
printf '#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\nint f_sum(int n);\n' >"$work/proj/common.h"
for i in $(seq 0 47); do
    {
        echo '#include "common.h"'
        for k in $(seq 0 19); do
            echo "int g${i}_$k(int x) { char b[64]; snprintf(b, sizeof b, \"%d\", x * $k); return (int)strlen(b) + x; }"
        done
        if [ "$i" -eq 0 ]; then
            echo 'int main(void) { printf("%d\n", g0_1(1)); return 0; }'
        fi
    } >"$work/proj/f$i.c"
done
tar -cf "$work/proj.tar" -C "$work" proj

# ---- the targets -------------------------------------------------------------------------------
mkdir -p "$work/ext4" "$work/ext4-fsync" "$work/bindfs-src" "$work/export" "$work/export-async"
mkdir -p "$work/floorfs-src" "$work/mnt-floorfs"
if [[ " $targets " == *" floorfs "* ]]; then
    pkg-config --exists fuse3 || { log "floorfs needs libfuse3's headers: apt-get install libfuse3-dev"; exit 1; }
    cc -O2 -Wall -o "$work/floorfs" "$repo/scripts/floorfs/floorfs.c" $(pkg-config --cflags --libs fuse3)
fi
mkdir -p "$work/ganesha-export" "$work/ganesha-v4-export" "$work/state" "$work/state-async"
mkdir -p "$work/mnt-bindfs" "$work/mnt-eagernfs" "$work/mnt-eagernfs-v4" "$work/mnt-eagernfs-v4wb" "$work/mnt-eagernfs-v4async" "$work/mnt-eagernfs-v4local" "$work/mnt-eagernfs-v4ra0" "$work/mnt-eagernfs-async"
mkdir -p "$work/mnt-ganesha" "$work/mnt-ganesha-v4"
mkdir -p "$work/export-before" "$work/state-before" "$work/mnt-before"
chmod 777 "$work/export" "$work/export-async" "$work/ganesha-export" "$work/ganesha-v4-export" "$work/export-before"
port=$((20000 + RANDOM % 20000))
start_server() { # export state port options [binary] -> pid in $started
    local extra=${server_args//\{state\}/$(basename "$work")-$(basename "$2")}
    # Journals named for this run, removed at its end (a journal left behind belongs to an
    # export that no longer exists, and the next run's server would refuse it).
    journals+=($(echo "$extra" | grep -o -- '--journal [^ ]*' | cut -d' ' -f2))
    # shellcheck disable=SC2086 # --server-args is a list of words
    taskset -c 1 "${5:-$bin}" serve "$1" --listen "127.0.0.1:$3" --state-dir "$2" -o "$4" $extra >"$2/server.out" 2>"$2/server.log" &
    started=$!
    until grep -q "listening on" "$2/server.out" 2>/dev/null; do
        kill -0 "$started" 2>/dev/null || { cat "$2/server.log" >&2; exit 1; }
        sleep 0.1
    done
}
start_server "$work/export" "$work/state" "$port" rw,no_root_squash
server_pid=$started
eagernfs_url="nfs://127.0.0.1:$port$work/export"
eagernfs_async_url=
if [[ " $targets " == *" eagernfs-async "* ]]; then
    start_server "$work/export-async" "$work/state-async" $((port + 3)) rw,no_root_squash,async
    async_pid=$started
    eagernfs_async_url="nfs://127.0.0.1:$((port + 3))$work/export-async"
fi
before_url=
if [ -n "$before_bin" ]; then
    start_server "$work/export-before" "$work/state-before" $((port + 4)) rw,no_root_squash "$before_bin"
    before_pid=$started
    before_url="nfs://127.0.0.1:$((port + 4))$work/export-before"
fi
ganesha_url=
if [[ " $targets " == *" ganesha "* ]]; then
    ganesha_url=$(GANESHA_RUN_DIR=$work/ganesha taskset -c 1 "$repo/scripts/ganesha.sh" start \
        "$work/ganesha-export" $((port + 1)))
    log "ganesha at $ganesha_url"
fi
ganesha_v4_url=
if [[ " $targets " == *" ganesha-v4 "* ]]; then
    ganesha_v4_url=$(GANESHA_NFS4=only GANESHA_RUN_DIR=$work/ganesha-v4 taskset -c 1 "$repo/scripts/ganesha.sh" \
        start "$work/ganesha-v4-export" $((port + 5)))
    log "ganesha (NFSv4 only) at $ganesha_v4_url"
fi

# The NFS version each eagernfs-mount target speaks (the mount's default, without vers, is
# NFSv4.2, else 4.1, else 3).
vers_of() {
    case $1 in
        eagernfs | eagernfs-async | ganesha) echo vers=3 ;;
        eagernfs-v4 | ganesha-v4) echo vers=4 ;;
        eagernfs-v4wb) echo vers=4,deleg_close=writeback ;;
        eagernfs-v4async) echo vers=4,dirops=async ;;
        eagernfs-v4local) echo vers=4,deleg_close=writeback,deleg_chmod=hold,dirops=async ;;
        eagernfs-v4ra0) echo vers=4,readahead_files=0 ;;
    esac
}
dir_of() { # target -> the directory the workload uses
    case $1 in
        ext4 | ext4-fsync) echo "$work/$1" ;;
        *) echo "$work/mnt-$1" ;;
    esac
}
do_mount() {
    local url=
    case $1 in
        ext4 | ext4-fsync) return ;;
        bindfs) taskset -c 0 bindfs --no-allow-other "$work/bindfs-src" "$work/mnt-bindfs"; return ;;
        floorfs) taskset -c 0 "$work/floorfs" "$work/floorfs-src" "$work/mnt-floorfs"; return ;;
        eagernfs | eagernfs-v4 | eagernfs-v4wb | eagernfs-v4async | eagernfs-v4local | eagernfs-v4ra0) url=$eagernfs_url ;;
        eagernfs-async) url=$eagernfs_async_url ;;
        ganesha) url=$ganesha_url ;;
        ganesha-v4) url=$ganesha_v4_url ;;
        before) taskset -c 0 "$before_bin" mount "$before_url" "$work/mnt-before" ${mount_options:+-o "$mount_options"}; return ;;
    esac
    taskset -c 0 "$bin" mount "$url" "$work/mnt-$1" -o "$(vers_of "$1")${mount_options:+,$mount_options}"
}
do_umount() {
    case $1 in
        ext4 | ext4-fsync) ;;
        bindfs | floorfs) fusermount3 -u "$work/mnt-$1" ;;
        *) "$bin" umount "$work/mnt-$1" ;;
    esac
}
# The extraction tar does (create, write, times, owner, mode, close), each file fsync'ed
# before its close; directories' attributes at the end, as tar sets them.
cat >"$work/untar-fsync.py" <<'PY'
import os, sys, tarfile
src, dest = sys.argv[1], sys.argv[2]
dirs = []
with tarfile.open(src) as t:
    for m in t:
        path = os.path.join(dest, m.name)
        if m.isdir():
            os.makedirs(path, exist_ok=True)
            dirs.append(m)
        elif m.isreg():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            data = t.extractfile(m).read()
            os.write(fd, data)
            os.fsync(fd)
            os.utime(fd, ns=(m.mtime * 10**9, m.mtime * 10**9))
            os.fchown(fd, m.uid, m.gid)
            os.fchmod(fd, m.mode)
            os.close(fd)
        elif m.issym():
            os.symlink(m.linkname, path)
        elif m.islnk():
            os.link(os.path.join(dest, m.linkname), path)
    for m in reversed(dirs):
        path = os.path.join(dest, m.name)
        os.chown(path, m.uid, m.gid)
        os.chmod(path, m.mode)
        os.utime(path, (m.mtime, m.mtime))
PY
remount() { do_umount "$1"; do_mount "$1"; }
# Then wait 3 s: a VM with free-page reporting hands freed memory back to its host within about 2 s,
# and the first touch of such a page is slow; waiting makes every cold read meet that (as a file
# not read for a while does) rather than some.
drop_caches() { sync; echo 3 >/proc/sys/vm/drop_caches; sleep 3; }

# calls the mount made so far, by NFS procedure ("NAME COUNT" lines), from its statistics socket
mount_ops() {
    case $1 in
        eagernfs | eagernfs-v4 | eagernfs-v4wb | eagernfs-v4async | eagernfs-v4local | eagernfs-v4ra0 | eagernfs-async | ganesha | ganesha-v4 | before)
            "$bin" stat "$work/mnt-$1" 2>/dev/null | awk '/^ *[A-Z_]+ +[0-9]+/ && $1 != "NULL" {print $1, $2}' ;;
    esac
}

: >"$work/results.tsv"
now() { date +%s.%N; }
step() { # target round name command...
    local target=$1 round=$2 name=$3
    shift 3
    local t0 t1 ops0 ops1 calls
    ops0=$(mount_ops "$target")
    t0=$(now)
    taskset -c 0 "$@" >/dev/null
    t1=$(now)
    ops1=$(mount_ops "$target")
    local secs
    secs=$(echo "$t1 - $t0" | bc)
    # per-procedure differences, "OP=N,OP=N"
    calls=$(join -a 2 -e 0 -o 0,1.2,2.2 <(echo "$ops0" | sort) <(echo "$ops1" | sort) 2>/dev/null |
        awk '$3 - $2 > 0 {printf "%s%s=%d", sep, $1, $3 - $2; sep = ","}')
    log "round $round $target $name: ${secs} s, calls ${calls:-none}"
    echo -e "$target\t$round\t$name\t$secs\t${calls:--}" >>"$work/results.tsv"
}

dd_steps() { # target round dir
    local t=$1 r=$2 d=$3
    # Every writer starts from the same memory: no page cache and free memory handed back
    # (see drop_caches). Without it a 1 GiB write's time depended on what ran before it.
    drop_caches
    step "$t" "$r" dd-write dd if=/dev/zero of="$d/big" bs=1M count="$dd_mib" conv=fsync status=none
    remount "$t"
    drop_caches
    step "$t" "$r" dd-read dd if="$d/big" of=/dev/null bs=1M status=none
    rm -f "$d/big"
}

run_round() { # target round
    local t=$1 r=$2 d
    d=$(dir_of "$t")
    if [ "$t" = ext4-fsync ]; then
        step "$t" "$r" untar python3 "$work/untar-fsync.py" "$work/tree.tar" "$d"
        rm -rf "${d:?}/$(basename "$tree")"
        return
    fi
    do_mount "$t"
    if [ "$t" = floorfs ]; then
        dd_steps "$t" "$r" "$d"
        do_umount "$t"
        return
    fi
    # The untar ends when the data is on the disk. syncfs through a FUSE mount does not reach
    # the file system below (bindfs left 140 MB dirty on ext4 after `sync -f`), so bindfs's is
    # synced where its files are; the NFS mounts' data is on stable storage at each close.
    # A close under a write delegation with deleg_close=writeback is not durable when it
    # returns: that target's untar ends when `eagernfs sync` has written everything back.
    local synced=$d
    [ "$t" = bindfs ] && synced=$work/bindfs-src
    local sync_cmd="sync -f '$synced'"
    case $t in eagernfs-v4wb | eagernfs-v4local) sync_cmd="'$bin' sync '$d'" ;; esac
    if [ "$settle_untar" != 0 ]; then
        sync
        sleep "$settle_untar"
    fi
    step "$t" "$r" untar sh -c "tar -xf '$work/tree.tar' -C '$d' && $sync_cmd"
    if [ "$t" = eagernfs-async ]; then
        rm -rf "${d:?}/$(basename "$tree")"
        do_umount "$t"
        return
    fi
    remount "$t"
    step "$t" "$r" find find "$d" -printf '%s\n'
    remount "$t"
    step "$t" "$r" cat sh -c "find '$d' -type f -exec cat {} + > /dev/null"
    step "$t" "$r" cat-again sh -c "find '$d' -type f -exec cat {} + > /dev/null"
    step "$t" "$r" rm-r rm -rf "$d/$(basename "$tree")"
    dd_steps "$t" "$r" "$d"
    tar -xf "$work/proj.tar" -C "$d"
    sync -f "$d"
    remount "$t"
    step "$t" "$r" make-j2 make -s -C "$d/proj" -j2
    rm -rf "$d/proj"
    # cp -r of the same tree: files made with their final mode and closed with data not yet
    # written (no chmod after the data, unlike tar), ended by the same sync as the untar.
    step "$t" "$r" cp-r sh -c "cp -r '$tree' '$d/cp-tree' && $sync_cmd"
    rm -rf "${d:?}/cp-tree"
    do_umount "$t"
}

# The order turns each round (a b c, b c a, c a b, ...): no target always runs first.
read -r -a order <<<"$targets"
for r in $(seq 1 "$rounds"); do
    for t in "${order[@]}"; do
        run_round "$t" "$r"
    done
    order=("${order[@]:1}" "${order[0]}")
done
cp "$work/results.tsv" "$out/results.tsv"
echo "scripts/bench-mount.sh ${orig_args[*]}" >"$out/command.txt"
{
    echo "# $(date -u +%Y-%m-%dT%H:%MZ) on $(nproc) CPUs, $(uname -r), load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "# tree: $tree, $files files, $dirs directories; dd: $dd_mib MiB; eagernfs $("$bin" --version)"
} >>"$out/command.txt"

python3 - "$out" "$files" "$targets" <<'EOF'
import collections, statistics, sys
out, files, targets = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
rows = [l.rstrip("\n").split("\t") for l in open(f"{out}/results.tsv") if l.strip()]
secs = collections.defaultdict(list)
calls = collections.defaultdict(list)
steps = []
byop = collections.defaultdict(list)
for target, rnd, step, s, c in rows:
    secs[(target, step)].append(float(s))
    ops = dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in c.split(",") if "=" in kv)
    calls[(target, step)].append(sum(ops.values()))
    byop[(target, step)].append(ops)
    if step not in steps:
        steps.append(step)
med = lambda v: statistics.median(v) if v else float("nan")
ratio_targets = [t for t in targets if t in ("eagernfs", "eagernfs-v4", "eagernfs-v4wb", "eagernfs-v4async", "eagernfs-v4local", "eagernfs-v4ra0", "ganesha", "ganesha-v4", "before")]
lines = ["| step | " + " | ".join(targets) + " | " + " | ".join(f"{t} / bindfs" for t in ratio_targets) + " |",
         "|---|" + "---:|" * (len(targets) + len(ratio_targets))]
for step in steps:
    cells = []
    for t in targets:
        v = secs[(t, step)]
        cells.append(f"{med(v):.2f} s ({min(v):.2f}–{max(v):.2f})" if v else "–")
    ratios = []
    for t in ratio_targets:
        b = secs.get(("bindfs", step))
        ratios.append(f"{med(secs[(t, step)]) / med(b):.2f}×" if b and secs[(t, step)] else "–")
    lines.append(f"| {step} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
dd = [step for step in ("dd-write", "dd-read") if secs.get(("ext4", step))]
if dd:
    lines += ["", "dd as a share of ext4's rate (from the medians):", ""]
    for step in dd:
        e = med(secs[("ext4", step)])
        parts = [f"{t} {e / med(secs[(t, step)]) * 100:.0f} %" for t in targets if t != "ext4" and secs.get((t, step))]
        lines.append(f"- {step}: " + ", ".join(parts))
lines.append("")
lines.append(f"Seconds, median of the rounds (range). Calls the mount sent, median per step ({files} files in the tree):")
lines.append("")
nfs_targets = [t for t in targets if t in ("eagernfs", "eagernfs-v4", "eagernfs-v4wb", "eagernfs-v4async", "eagernfs-v4local", "eagernfs-v4ra0", "eagernfs-async", "ganesha", "ganesha-v4", "before")]
lines.append("| step | " + " | ".join(nfs_targets) + " |")
lines.append("|---|" + "---:|" * len(nfs_targets))
for step in steps:
    cells = []
    for t in nfs_targets:
        c = med(calls[(t, step)])
        per = f" ({c / files:.2f} per file)" if step in ("untar", "cat", "cat-again", "rm-r") else ""
        cells.append(f"{c:.0f}{per}" if calls.get((t, step)) else "–")
    lines.append(f"| {step} | " + " | ".join(cells) + " |")
lines.append("")
lines.append("Calls per file by procedure (median over rounds):")
lines.append("")
for step in ("untar", "cat", "cat-again", "rm-r"):
    for t in nfs_targets:
        if not byop.get((t, step)):
            continue
        names = sorted({n for o in byop[(t, step)] for n in o})
        parts = [f"{n} {med([o.get(n, 0) for o in byop[(t, step)]]) / files:.2f}" for n in names]
        lines.append(f"- {step}, {t}: " + ", ".join(parts))
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))

# A grouped bar chart: seconds per step, relative to bindfs (log-free, capped at 10x).
W, H, left, bottom, top = 780, 360, 60, 60, 30
colors = {"ext4": "#7f7f7f", "ext4-fsync": "#bcbd22", "bindfs": "#2ca02c", "floorfs": "#8c564b", "eagernfs": "#1f77b4",
          "eagernfs-async": "#17becf", "ganesha": "#d62728", "before": "#9467bd",
          "eagernfs-v4": "#aec7e8", "eagernfs-v4wb": "#9467bd", "eagernfs-v4async": "#17becf", "eagernfs-v4local": "#e377c2", "eagernfs-v4ra0": "#c5b0d5", "ganesha-v4": "#ff9896"}
cap = 10.0
plot_h = H - top - bottom
group_w = (W - left - 20) / len(steps)
bar_w = group_w * 0.8 / len(targets)
svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
       f'<text x="{W/2}" y="18" text-anchor="middle">Time per step relative to bindfs (median; capped at {cap:.0f}×)</text>']
for k in range(0, 11, 2):
    y = H - bottom - plot_h * k / cap
    svg.append(f'<line x1="{left}" y1="{y}" x2="{W-20}" y2="{y}" stroke="#ddd"/><text x="{left-6}" y="{y+4}" text-anchor="end">{k}×</text>')
for i, step in enumerate(steps):
    gx = left + i * group_w + group_w * 0.1
    base = med(secs.get(("bindfs", step), [])) if secs.get(("bindfs", step)) else None
    for j, t in enumerate(targets):
        v = secs.get((t, step))
        if not v or not base:
            continue
        rel = min(med(v) / base, cap)
        h = plot_h * rel / cap
        x = gx + j * bar_w
        svg.append(f'<rect x="{x:.1f}" y="{H-bottom-h:.1f}" width="{bar_w-2:.1f}" height="{h:.1f}" fill="{colors.get(t, "#999")}"><title>{t} {step}: {med(v):.2f} s</title></rect>')
    svg.append(f'<text x="{gx + group_w*0.4:.1f}" y="{H-bottom+16}" text-anchor="middle">{step}</text>')
for j, t in enumerate(targets):
    svg.append(f'<rect x="{left + j*115}" y="{H-22}" width="12" height="12" fill="{colors.get(t, "#999")}"/><text x="{left + j*115 + 16}" y="{H-12}">{t}</text>')
svg.append("</svg>")
open(f"{out}/mount.svg", "w").write("\n".join(svg) + "\n")
EOF
log "wrote $out/table.md, $out/mount.svg, $out/results.tsv"
