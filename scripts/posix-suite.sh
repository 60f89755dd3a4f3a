#!/usr/bin/env bash
# A POSIX suite through the mount (issue 12): go-fuse's posixtest cases (link counts, renames
# over open files, directory seeks, holes, fallocate, O_TMPFILE, fcntl locks, xattrs, …; Go
# module github.com/hanwen/go-fuse/v2, built from tests/posix) run on a local directory (the
# baseline), through `eagernfs mount` of eagernfs over NFSv3 (`vers=3`) and over NFSv4.1
# (`vers=4.1`, target eagernfs-v4), and through `eagernfs mount` of nfs-ganesha (with its
# lock manager). Prints a table of every case on every target.
#
#   scripts/posix-suite.sh [--out FILE] [--check] [--no-ganesha] [--no-v4] [--cephfs CONF]
#
# --check: exit 1 if a case passes on the local directory but fails through a mount of
# eagernfs (either version), unless tests/posix/known-differences.txt names it with the reason
# (or, for NFSv4 only, tests/posix/known-differences-nfs4.txt) (CI runs this).
# --cephfs CONF: also through `eagernfs mount` of a CephFS export (the file system `cephfs` of
# the cluster CONF names, e.g. scripts/ceph-cluster.sh's); with --check, a case that passes
# through the mount of the local export must pass there too, unless
# tests/posix/known-differences-cephfs.txt names it with the reason, traced to CephFS, or
# tests/posix/known-differences.txt names it (a difference of every network mount).
# The binary is $EAGERNFS_BIN if set, else target/debug/eagernfs (built if missing). Needs
# root, fuse3 and Go (the module comes from the Go module proxy).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
all_args="$*"
out=
check=0
ganesha=1
v4=1
cephfs_conf=
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --check) check=1; shift ;;
        --no-ganesha) ganesha=0; shift ;;
        --no-v4) v4=0; shift ;;
        --cephfs) cephfs_conf=$2; shift 2 ;;
        -h | --help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "posix-suite: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "posix-suite: $*" >&2; }
bin=${EAGERNFS_BIN:-${CARGO_TARGET_DIR:-$repo/target}/debug/eagernfs}
[ -x "$bin" ] || (cd "$repo" && cargo build -q -p eagernfs >&2)
command -v go >/dev/null || { log "needs Go (https://go.dev; Debian: golang)"; exit 1; }

work=$(mktemp -d /var/tmp/eagernfs-posix.XXXXXX)
chmod 755 "$work"
server_pid=
cleanup() {
    for m in "$work"/mnt-*; do
        [ -d "$m" ] && "$bin" umount "$m" >/dev/null 2>&1 || true
    done
    [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

log "building the suite (tests/posix)"
(cd "$repo/tests/posix" && go test -c -o "$work/posix.test" .) >&2

# run NAME DIR: one line per case, "NAME<TAB>CASE<TAB>PASS|FAIL|SKIP", into results.tsv.
: >"$work/results.tsv"
run() {
    local name=$1 dir=$2
    log "running on $name ($dir)"
    (cd "$work" && POSIX_DIR=$dir timeout 600 "$work/posix.test" -test.v -test.timeout 540s \
        >"$work/$name.log" 2>&1) || true
    sed -n 's/^    --- \(PASS\|FAIL\|SKIP\): TestPosix\/\([A-Za-z0-9_]*\).*/\2\t\1/p' "$work/$name.log" |
        while IFS=$'\t' read -r case result; do echo -e "$name\t$case\t$result"; done >>"$work/results.tsv"
    grep -q "TestPosix/" "$work/$name.log" || { log "$name: the suite did not run:"; tail -20 "$work/$name.log" >&2; exit 1; }
}

mkdir -p "$work/local" "$work/export" "$work/state" "$work/mnt-eagernfs" "$work/mnt-ganesha"
chmod 777 "$work/export"
run local "$work/local"

port=$((20000 + RANDOM % 20000))
"$bin" serve "$work/export" --listen "127.0.0.1:$port" --state-dir "$work/state" -o rw,no_root_squash \
    >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
until grep -q "listening on" "$work/server.out" 2>/dev/null; do
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done
mkdir -p "$work/export/e"
"$bin" mount "nfs://127.0.0.1:$port$work/export" "$work/mnt-eagernfs" -o vers=3
run eagernfs "$work/mnt-eagernfs/e"
"$bin" umount "$work/mnt-eagernfs"
if [ "$v4" = 1 ]; then
    mkdir -p "$work/export/e4" "$work/mnt-eagernfs-v4"
    "$bin" mount "nfs://127.0.0.1:$port$work/export" "$work/mnt-eagernfs-v4" -o vers=4.1
    run eagernfs-v4 "$work/mnt-eagernfs-v4/e4"
    "$bin" umount "$work/mnt-eagernfs-v4"
fi
kill -TERM "$server_pid"
wait "$server_pid" || true
server_pid=

if [ -n "$cephfs_conf" ]; then
    # The file system's root, served on its own; the suite runs in a fresh directory of it.
    mkdir -p "$work/mnt-cephfs" "$work/state-cephfs"
    "$bin" serve "cephfs://admin@cephfs/?conf=$cephfs_conf" --listen "127.0.0.1:$((port + 20))" \
        --state-dir "$work/state-cephfs" -o rw,no_root_squash >"$work/server-cephfs.out" 2>"$work/server-cephfs.log" &
    server_pid=$!
    until grep -q "listening on" "$work/server-cephfs.out" 2>/dev/null; do
        kill -0 "$server_pid" 2>/dev/null || { cat "$work/server-cephfs.log" >&2; exit 1; }
        sleep 0.1
    done
    "$bin" mount "nfs://127.0.0.1:$((port + 20))/" "$work/mnt-cephfs" -o vers=3
    cdir="$work/mnt-cephfs/posix-$$-$RANDOM"
    mkdir "$cdir"
    chmod 777 "$cdir"
    run cephfs "$cdir"
    rm -rf "$cdir"
    "$bin" umount "$work/mnt-cephfs"
    kill -TERM "$server_pid"
    wait "$server_pid" || true
    server_pid=
fi

if [ "$ganesha" = 1 ]; then
    mkdir -p "$work/export/g"
    chmod 777 "$work/export/g"
    url=$(GANESHA_NLM=1 GANESHA_NLM_PORT=$((port + 12)) GANESHA_RUN_DIR=$work/ganesha \
        "$repo/scripts/ganesha.sh" start "$work/export" "$((port + 10))" vfs)
    "$bin" mount "$url" "$work/mnt-ganesha" -o vers=3
    run ganesha "$work/mnt-ganesha/g"
    "$bin" umount "$work/mnt-ganesha"
    GANESHA_RUN_DIR=$work/ganesha "$repo/scripts/ganesha.sh" stop >/dev/null 2>&1 || true
fi

targets="local eagernfs"
header="| case | local ext4 | eagernfs mount of eagernfs (NFSv3) |"
rule="| --- | --- | --- |"
if [ "$v4" = 1 ]; then
    targets="$targets eagernfs-v4"
    header="$header eagernfs mount of eagernfs (NFSv4.1) |"
    rule="$rule --- |"
fi
targets="$targets ganesha"
header="$header eagernfs mount of nfs-ganesha |"
rule="$rule --- |"
if [ -n "$cephfs_conf" ]; then
    targets="$targets cephfs"
    header="$header eagernfs mount of eagernfs on CephFS |"
    rule="$rule --- |"
fi
table() {
    echo "$header"
    echo "$rule"
    cut -f2 "$work/results.tsv" | sort -u | while read -r case; do
        local row="| $case"
        for target in $targets; do
            local r
            r=$(awk -F'\t' -v t="$target" -v c="$case" '$1 == t && $2 == c { print $3 }' "$work/results.tsv")
            row="$row | ${r:--}"
        done
        echo "$row |"
    done
    for target in $targets; do
        awk -F'\t' -v t="$target" '$1 == t { n[$3]++ } END { if (n["PASS"] + n["FAIL"] + n["SKIP"] > 0) printf "\n%s: %d pass, %d fail, %d skip", t, n["PASS"], n["FAIL"], n["SKIP"] }' "$work/results.tsv"
    done
    echo
}
if [ -n "$out" ]; then
    {
        echo "# go-fuse posixtest through the mount, $(date +%Y-%m-%d)"
        echo
        echo "\`scripts/posix-suite.sh $all_args\`; github.com/hanwen/go-fuse/v2 $(sed -n 's/^require github.com\/hanwen\/go-fuse\/v2 //p' "$repo/tests/posix/go.mod")."
        echo
        table
    } >"$out"
    log "wrote $out"
fi
table

if [ "$check" = 1 ]; then
    known=$repo/tests/posix/known-differences.txt
    bad=0
    while IFS=$'\t' read -r target case result; do
        [ "$target" = eagernfs ] || [ "$target" = eagernfs-v4 ] || continue
        [ "$result" = FAIL ] || continue
        local_result=$(awk -F'\t' -v c="$case" '$1 == "local" && $2 == c { print $3 }' "$work/results.tsv")
        [ "$local_result" = PASS ] || continue
        if grep -q "^$case[[:space:]]" "$known" 2>/dev/null; then
            log "known difference ($target): $(grep "^$case[[:space:]]" "$known")"
            continue
        fi
        known4=$repo/tests/posix/known-differences-nfs4.txt
        if [ "$target" = eagernfs-v4 ] && grep -q "^$case[[:space:]]" "$known4" 2>/dev/null; then
            log "known NFSv4 difference: $(grep "^$case[[:space:]]" "$known4")"
            continue
        fi
        log "FAIL through the mount ($target), PASS locally: $case"
        sed -n "/--- FAIL: TestPosix\/$case/,/--- /p" "$work/$target.log" | head -20 >&2
        bad=1
    done <"$work/results.tsv"
    if [ -n "$cephfs_conf" ]; then
        knownc=$repo/tests/posix/known-differences-cephfs.txt
        while IFS=$'\t' read -r target case result; do
            [ "$target" = cephfs ] && [ "$result" != PASS ] || continue
            mount_result=$(awk -F'\t' -v c="$case" '$1 == "eagernfs" && $2 == c { print $3 }' "$work/results.tsv")
            [ "$mount_result" = PASS ] || continue
            if grep -q "^$case[[:space:]]" "$knownc" 2>/dev/null; then
                log "known CephFS difference: $(grep "^$case[[:space:]]" "$knownc")"
                continue
            fi
            # A difference of any network mount (known-differences.txt) is one of this mount
            # too; some of them pass or fail by chance, so the mount of a local export may
            # have passed where this one failed.
            if grep -q "^$case[[:space:]]" "$known" 2>/dev/null; then
                log "known difference (cephfs): $(grep "^$case[[:space:]]" "$known")"
                continue
            fi
            log "$result on CephFS, PASS through the mount of a local export: $case"
            sed -n "/--- FAIL: TestPosix\/$case/,/--- /p" "$work/cephfs.log" | head -20 >&2
            bad=1
        done <"$work/results.tsv"
    fi
    [ "$bad" = 0 ] || exit 1
    log "every case that passes on a local directory passes through the mount (or is a known difference)"
fi
