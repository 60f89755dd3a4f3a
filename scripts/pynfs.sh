#!/usr/bin/env bash
# Runs pynfs's NFSv4.1 server tests (the suite knfsd and nfs-ganesha developers use) against
# eagernfs, or against nfs-ganesha for comparison, and writes the pass/fail/skip lists.
#
#   scripts/pynfs.sh PYNFS_DIR [--server eagernfs|ganesha] [--lease S] [--out DIR] [TESTS...]
#
# PYNFS_DIR is a checkout of pynfs (git://git.linux-nfs.org/projects/cdmackay/pynfs.git or a
# mirror of it); pynfs is not on PyPI and is never vendored here. It is built in place on first
# use (`setup.py build`, which needs python3-ply). TESTS are pynfs test codes or flags
# (default: `all`, the 4.1 suite's standard group). The server gets a fresh export directory
# and state directory, `rw,insecure,no_root_squash` (pynfs runs as root from high ports), and a
# lease of --lease seconds (default 15: the courtesy tests sleep for one or two leases).
#
# Output (in --out, default ./pynfs-results): SERVER.log (pynfs's output), SERVER.json
# (its results), SERVER.md (the tests by outcome, with pynfs's reason for each failure).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

[ $# -ge 1 ] || usage
pynfs=$(realpath -e "$1") || { echo "pynfs.sh: no such directory: $1" >&2; exit 2; }
shift
server=eagernfs lease=15 out=pynfs-results
tests=()
while [ $# -gt 0 ]; do
    case "$1" in
        --server) server=$2; shift 2 ;;
        --lease) lease=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        -h|--help) usage ;;
        *) tests+=("$1"); shift ;;
    esac
done
[ ${#tests[@]} -gt 0 ] || tests=(all)
[ -f "$pynfs/nfs4.1/testserver.py" ] || { echo "pynfs.sh: $pynfs is not a pynfs checkout (no nfs4.1/testserver.py)" >&2; exit 2; }

# pynfs needs the distribution's python3 with ply (and gssapi, imported unconditionally).
py=/usr/bin/python3
if ! "$py" -c 'import ply, gssapi' 2>/dev/null; then
    echo "pynfs.sh: $py lacks ply or gssapi: apt-get install python3-ply python3-gssapi" >&2
    exit 1
fi
if [ ! -f "$pynfs/nfs4.1/xdrdef/nfs4_const.py" ]; then
    echo "pynfs.sh: building pynfs in $pynfs" >&2
    # setup.py runs `python3 setup.py` in each part; make that the distribution's python.
    shim=$(mktemp -d)
    ln -s "$py" "$shim/python3"
    (cd "$pynfs" && PATH="$shim:$PATH" "$py" setup.py build >"$shim/build.log" 2>&1) ||
        { tail -20 "$shim/build.log" >&2; exit 1; }
    rm -rf "$shim"
fi

mkdir -p "$out"
out=$(realpath "$out")
work=$(mktemp -d /tmp/eagernfs-pynfs.XXXXXX)
export_dir="$work/export"
mkdir -p "$export_dir"
chmod 1777 "$export_dir"
port=$((20000 + RANDOM % 40000))
pid=""
cleanup() {
    if [ "$server" = ganesha ]; then
        GANESHA_RUN_DIR="$work/ganesha" scripts/ganesha.sh stop || true
    elif [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

case "$server" in
    eagernfs)
        cargo build --release -p eagernfs >&2
        ./target/release/eagernfs serve "$export_dir" --listen "127.0.0.1:$port" \
            --state-dir "$work/state" -o rw,insecure,no_root_squash --lease-time "$lease" \
            --grace-period "$lease" >"$out/eagernfs-server.log" 2>&1 &
        pid=$!
        for _ in $(seq 100); do
            grep -q "listening on" "$out/eagernfs-server.log" && break
            kill -0 "$pid" 2>/dev/null || { tail "$out/eagernfs-server.log" >&2; exit 1; }
            sleep 0.1
        done
        ;;
    ganesha)
        GANESHA_RUN_DIR="$work/ganesha" GANESHA_NFS4=1 GANESHA_LEASE_S="$lease" \
            scripts/ganesha.sh start "$export_dir" "$port" vfs >/dev/null
        ;;
    *) echo "pynfs.sh: --server is eagernfs or ganesha, not $server" >&2; exit 2 ;;
esac

echo "pynfs.sh: running pynfs ${tests[*]} against $server on 127.0.0.1:$port" >&2
(cd "$pynfs/nfs4.1" && "$py" testserver.py "127.0.0.1:$port$export_dir" --maketree \
    --json "$out/$server.json" "${tests[@]}") >"$out/$server.log" 2>&1 || true
tail -3 "$out/$server.log" >&2

"$py" - "$out/$server.log" "$server" "${tests[*]}" "$lease" >"$out/$server.md" <<'PY'
import re, sys
path, server, tests, lease = sys.argv[1:5]
results, current = [], None
for line in open(path, errors="replace"):
    m = re.match(r"^(\S+)\s+(st_\S+)\s+: ([A-Z ]+?)\s*$", line)
    if m:
        current = {"code": m[1], "test": m[2], "outcome": m[3], "why": []}
        results.append(current)
    elif current is not None and line.startswith("           ") and line.strip():
        current["why"].append(line.strip())
    else:
        current = None
by = {}
for r in results:
    by.setdefault(r["outcome"], []).append(r)
summary = ", ".join(f"{len(v)} {k.lower()}" for k, v in sorted(by.items()))
print(f"# pynfs NFSv4.1 `{tests}` against {server}\n")
print(f"Lease {lease} s. {len(results)} tests run: {summary}.\n")
for kind in sorted(k for k in by if k != "PASS"):
    print(f"## {kind}\n")
    print("| code | test | why |\n| --- | --- | --- |")
    for r in sorted(by[kind], key=lambda r: r["code"]):
        why = " ".join(r["why"]).replace("|", "/")
        print(f"| {r['code']} | {r['test']} | {why[:300]} |")
    print()
print("## PASS\n")
print(", ".join(sorted(r["code"] for r in by.get("PASS", []))))
PY
echo "pynfs.sh: $out/$server.md" >&2
