# Shared by scripts/bench-mount.sh and scripts/bench-floor.sh (sourced, not run): the tree they
# work on and the FUSE mounts they leave behind.
#
# The sourcing script defines `log` (a line on stderr).

# pack_tree TREE WORK: TREE as WORK/tree.tar; sets `files` and `dirs` to what it holds.
pack_tree() {
    local tree=$1 work=$2
    log "packing $tree"
    tar -cf "$work/tree.tar" -C "$(dirname "$tree")" "$(basename "$tree")"
    files=$(tar -tvf "$work/tree.tar" | grep -c '^-' || true)
    dirs=$(tar -tvf "$work/tree.tar" | grep -c '^d' || true)
    log "tree: $files files, $dirs directories, $(du -sh "$work/tree.tar" | cut -f1)"
}

# unmount_all WORK BIN: unmount every WORK/mnt-* still mounted: an eagernfs mount (type
# fuse.eagernfs) with BIN's umount, which waits for its write-back; any other FUSE mount
# (bindfs, floorfs) with fusermount3; lazily if that fails. Fails if one is still there, so
# the caller never removes WORK through a mount.
unmount_all() {
    local work=$1 bin=$2 m
    for m in "$work"/mnt-*; do
        mountpoint -q "$m" 2>/dev/null || continue
        if [ "$(findmnt -n -o FSTYPE --mountpoint "$m" 2>/dev/null)" = fuse.eagernfs ]; then
            "$bin" umount "$m" >/dev/null 2>&1 || "$bin" umount -z "$m" >/dev/null 2>&1 || true
        else
            fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
        fi
    done
    for m in "$work"/mnt-*; do
        mountpoint -q "$m" 2>/dev/null && return 1
    done
    return 0
}
