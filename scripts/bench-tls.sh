#!/usr/bin/env bash
# What RPC-with-TLS costs (issue 8, point 6): the same eagernfs server (memory backend, so the
# transport is what is measured) answering plain TCP and TLS 1.3 clients in one run:
# 1 GiB sequential WRITE (UNSTABLE + COMMIT) and READ with 1 MiB RPCs, 8 in flight, and 8 KiB
# RPCs one at a time (QD1), via `eagernfs bench stream`. Server on CPU 1, client on CPU 0.
# Throughput, latency and the TLS / plain ratios. (libnfs's TLS client needs kTLS, which this
# kernel lacks, so our client is the only TLS peer.)
#
#   scripts/bench-tls.sh [--out DIR] [--size SIZE]
#
# Writes DIR/table.md and DIR/command.txt (default docs/benchmarks/tls-YYYY-MM-DD).
# The binary is $EAGERNFS_BIN if set, else a release build. Needs openssl for the certificates.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
out=$repo/docs/benchmarks/tls-$(date +%Y-%m-%d)
size=1GiB
orig_args=("$@")
while [ $# -gt 0 ]; do
    case "$1" in
        --out) out=$2; shift 2 ;;
        --size) size=$2; shift 2 ;;
        -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "bench-tls: unknown argument $1" >&2; exit 2 ;;
    esac
done
log() { echo "bench-tls: $*" >&2; }
bin=${EAGERNFS_BIN:-}
if [ -z "$bin" ]; then
    (cd "$repo" && cargo build --release -q -p eagernfs >&2)
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/eagernfs
fi
work=$(mktemp -d /var/tmp/eagernfs-tls.XXXXXX)
server_pid=
cleanup() {
    [ -n "$server_pid" ] && kill -TERM "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$out" "$work/state"

# A CA and a server certificate for 127.0.0.1.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/ca.key" \
    -out "$work/ca.pem" -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$work/srv.key" \
    -out "$work/srv.csr" -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$work/ext"
openssl x509 -req -in "$work/srv.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial \
    -out "$work/srv.pem" -days 2 -extfile "$work/ext" 2>/dev/null

port=$((20000 + RANDOM % 20000))
taskset -c 1 "$bin" serve /bench --memory --memory-size-mib 4096 --listen "127.0.0.1:$port" \
    --state-dir "$work/state" -o rw,no_root_squash --tls-cert "$work/srv.pem" --tls-key "$work/srv.key" \
    >"$work/server.out" 2>"$work/server.log" &
server_pid=$!
until grep -q "listening on" "$work/server.out" 2>/dev/null; do
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/server.log" >&2; exit 1; }
    sleep 0.1
done

: >"$work/results.tsv"
# run TRANSPORT QUERY DIRECTION SIZE RPC INFLIGHT
run() {
    local transport=$1 query=$2 dir=$3 bytes=$4 rpc=$5 k=$6 url text mbs lat
    url="nfs://127.0.0.1:$port/bench${query:+?$query}"
    text=$(taskset -c 0 "$bin" bench stream "$url" --direction "$dir" --size "$bytes" --rpc-size "$rpc" \
        --in-flight "$k" --file "s-$transport-$rpc-$k.dat" 2>&1)
    mbs=$(echo "$text" | sed -n 's/^ *MB\/s *\([0-9.]*\) to the last reply.*/\1/p')
    lat=$(echo "$text" | sed -n 's/^ *latency *mean \([0-9.]* [^ ]*s\) · p50 \([0-9.]* [^ ]*s\) · p99 \([0-9.]* [^ ]*s\).*/\1\t\2\t\3/p')
    log "$transport $dir $rpc x$k: $mbs MB/s, latency (mean, p50, p99) $lat"
    echo -e "$transport\t$dir\t$rpc x$k\t$mbs\t$lat" >>"$work/results.tsv"
}
tls="xprtsec=tls&tls_ca=$work/ca.pem"
# Unmeasured first writes of every file: the memory backend allocates on a file's first write,
# which is not what this measures.
for pair in "plain:" "tls:$tls"; do
    transport=${pair%%:*} query=${pair#*:}
    for shape in "$size 1MiB 8" "32MiB 8KiB 1"; do
        # shellcheck disable=SC2086
        set -- $shape
        taskset -c 0 "$bin" bench stream "nfs://127.0.0.1:$port/bench${query:+?$query}" --direction write \
            --size "$1" --rpc-size "$2" --in-flight 8 --file "s-$transport-$2-$3.dat" >/dev/null 2>&1
    done
done
# Each transport has its own files, and the order alternates so neither always goes first.
for workload in "write $size 1MiB 8" "read $size 1MiB 8" "write 32MiB 8KiB 1" "read 32MiB 8KiB 1"; do
    # shellcheck disable=SC2086
    set -- $workload
    run plain "" "$@"
    run tls "$tls" "$@"
    run tls "$tls" "$@"
    run plain "" "$@"
done

{
    echo "# RPC-with-TLS cost, $(date +%Y-%m-%d)"
    echo
    echo "\`scripts/bench-tls.sh ${orig_args[*]}\`: one eagernfs server (\`--memory\`, so the transport is what is"
    echo "measured) on CPU 1 answering plain TCP and TLS 1.3 (rustls, AES-GCM via ring, in user space: no"
    echo "kTLS) from \`eagernfs bench stream\` on CPU 0, in turn, same run."
    echo
    echo "| workload | transport | MB/s | latency mean | p50 | p99 |"
    echo "| --- | --- | ---: | ---: | ---: | ---: |"
    while IFS=$'\t' read -r transport dir shape mbs mean p50 p99; do
        echo "| $dir $shape | $transport | $mbs | $mean | $p50 | $p99 |"
    done <"$work/results.tsv"
    echo
    echo "Each workload ran plain, TLS, TLS, plain; the ratio compares the means of the two runs of each."
    echo
    awk -F'\t' '
        { key = $2 " " $3; if ($1 == "plain") { plain[key] += $4; np[key]++ } else { tls[key] += $4; nt[key]++ } }
        END { for (k in plain) if (nt[k] > 0) printf "- %s: TLS at %.2f of plain throughput (%.1f vs %.1f MB/s)\n", k, (tls[k] / nt[k]) / (plain[k] / np[k]), tls[k] / nt[k], plain[k] / np[k] }
    ' "$work/results.tsv" | sort
} >"$out/table.md"
echo "scripts/bench-tls.sh ${orig_args[*]}" >"$out/command.txt"
cat "$out/table.md"
