#!/usr/bin/env bash
# Issue 34's restart check at its full length: an untar of 720 small files (with symlinks and
# modes) through an NFSv4.1 `eagernfs mount` of `eagernfs serve`, the server killed with kill -9
# and started again N times at evenly spaced points of the untar; the untar must finish with no
# error and the tree must be the same (names, types, modes, owners, sizes, mtimes, contents).
# It is crates/cli/tests/fuse_nfs4.rs's an_untar_through_an_nfsv4_1_mount_goes_on_through_kill_9_of_the_server
# (2 kills in `scripts/test`) with EAGERNFS_RESTART_ROUNDS=N; prints when each kill came and how
# long the untar took.
#
#   scripts/restart-untar.sh [--rounds N]      (default 10)
#
# Needs root and fuse3 (the test skips, saying so, without them).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
rounds=10
while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) rounds=$2; shift 2 ;;
        -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "restart-untar: unknown argument $1" >&2; exit 2 ;;
    esac
done
cd "$repo"
EAGERNFS_RESTART_ROUNDS=$rounds exec cargo test -q -p eagernfs --test fuse_nfs4 \
    an_untar_through_an_nfsv4_1_mount_goes_on_through_kill_9_of_the_server -- --nocapture
