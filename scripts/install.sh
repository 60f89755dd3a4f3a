#!/usr/bin/env bash
# Install eagernfs the Linux way: the binary, mount(8)'s helpers, man pages, shell completions,
# systemd units and an example configuration.
#
#   scripts/install.sh [--prefix DIR] [--destdir DIR] [--bin FILE] [--debug]
#
#   --prefix DIR   where the binary and docs go (default /usr/local)
#   --destdir DIR  stage everything under DIR instead of / (for packaging and tests)
#   --bin FILE     install this already-built binary instead of running `cargo install`
#   --debug        `cargo install --debug` (a quick build, for checks; not for production)
#
# Installs PREFIX/bin/eagernfs (cargo install --path crates/cli), /sbin/mount.fuse.eagernfs and
# /sbin/umount.fuse.eagernfs (symlinks: mount -t fuse.eagernfs and /etc/fstab lines work),
# PREFIX/share/man/man1/eagernfs*.1, bash/zsh/fish completions, /etc/systemd/system/
# eagernfs.service and eagernfs-mount@.service, and /etc/eagernfs/exports and
# /etc/default/eagernfs unless they exist. Then: `systemctl daemon-reload`,
# `systemctl enable --now eagernfs` (see README, "Install").
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
prefix=/usr/local
destdir=
bin=
debug=()
while [ $# -gt 0 ]; do
    case "$1" in
        --prefix) prefix=$2; shift 2 ;;
        --destdir) destdir=$2; shift 2 ;;
        --bin) bin=$2; shift 2 ;;
        --debug) debug=(--debug); shift ;;
        -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
log() { echo "install.sh: $*" >&2; }

root=${destdir%/}
bindir=$prefix/bin
mkdir -p "$root$bindir" "$root/sbin" "$root$prefix/share/man/man1" "$root/etc/systemd/system" \
    "$root/etc/eagernfs/mount" "$root$prefix/share/bash-completion/completions" \
    "$root$prefix/share/zsh/site-functions" "$root$prefix/share/fish/vendor_completions.d"

if [ -n "$bin" ]; then
    install -m 0755 "$bin" "$root$bindir/eagernfs"
else
    log "cargo install --path crates/cli ${debug[*]}"
    # The workspace's target directory: a second install (or one after `cargo build`) reuses it.
    cargo install --quiet --locked "${debug[@]}" --path "$repo/crates/cli" --root "$root$prefix" \
        --target-dir "${CARGO_TARGET_DIR:-$repo/target}" --force
    rm -f "$root$prefix/.crates.toml" "$root$prefix/.crates2.json"
fi
eagernfs=$root$bindir/eagernfs
"$eagernfs" --version >/dev/null

# mount(8) runs /sbin/mount.TYPE for `-t TYPE`; umount(8) runs /sbin/umount.TYPE.
for helper in mount.fuse.eagernfs umount.fuse.eagernfs; do
    ln -sf "$bindir/eagernfs" "$root/sbin/$helper"
done

"$eagernfs" manpages "$root$prefix/share/man/man1" >/dev/null
# The helpers' pages are section 8 (system administration), where man(1) looks for them.
mkdir -p "$root$prefix/share/man/man8"
for page in "$root$prefix/share/man/man1"/*.8; do
    [ -e "$page" ] && mv "$page" "$root$prefix/share/man/man8/"
done
"$eagernfs" completions bash >"$root$prefix/share/bash-completion/completions/eagernfs"
"$eagernfs" completions zsh >"$root$prefix/share/zsh/site-functions/_eagernfs"
"$eagernfs" completions fish >"$root$prefix/share/fish/vendor_completions.d/eagernfs.fish"

for unit in eagernfs.service eagernfs-mount@.service; do
    sed "s|@BINDIR@|$bindir|g" "$repo/dist/systemd/$unit" >"$root/etc/systemd/system/$unit"
    chmod 0644 "$root/etc/systemd/system/$unit"
done
[ -e "$root/etc/eagernfs/exports" ] || install -m 0644 "$repo/dist/etc/exports" "$root/etc/eagernfs/exports"
[ -e "$root/etc/default/eagernfs" ] || install -D -m 0644 "$repo/dist/etc/default-eagernfs" "$root/etc/default/eagernfs"

log "installed $("$eagernfs" --version) under ${destdir:-/} (prefix $prefix)"
if [ -z "$destdir" ] && [ -d /run/systemd/system ]; then
    systemctl daemon-reload
    log "now: edit /etc/eagernfs/exports, then systemctl enable --now eagernfs"
fi
