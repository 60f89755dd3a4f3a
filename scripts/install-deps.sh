#!/usr/bin/env bash
# Installs the system packages the end-to-end tests and benchmarks need: the libnfs client
# tools and library (our reference client), nfs-ganesha (our reference server), rpcbind (which
# ganesha registers with), rpc.statd (nfs-common: ganesha's lock manager needs it), fuse3, a C
# toolchain for tests/clients/*.c, libfuse3-dev (scripts/bench-floor.sh builds floorfs against
# it), bindfs (a FUSE passthrough: scripts/bench-mount.sh's ceiling for any FUSE client), and
# chromium (the status page is tested in a real headless browser). Then PyPI's nfs-rs (an independent NFSv4.1 client) into a virtual environment,
# ~/.cache/eagernfs/nfs-rs (crates/cli/tests/e2e_nfs4.rs runs it).
#
# Idempotent and cheap when warm: `dpkg -s` decides first, and `apt-get update` only runs when
# something is actually missing, so a machine that already has everything pays ~0 s.
set -euo pipefail

packages=(
    libnfs-utils libnfs-dev
    nfs-ganesha nfs-ganesha-vfs nfs-ganesha-mem
    rpcbind nfs-common fuse3 libfuse3-dev pkg-config build-essential fio bindfs
    chromium
    python3-venv
)

# nfs-rs, pinned: the NFSv4.1 client the end-to-end test drives.
nfsrs_version=0.8.7
nfsrs_venv=${EAGERNFS_NFSRS_VENV:-$HOME/.cache/eagernfs/nfs-rs}
install_nfsrs() {
    if "$nfsrs_venv/bin/python" -c "import nfs_rs, sys; sys.exit(nfs_rs.__version__ != '$nfsrs_version')" 2>/dev/null; then
        echo "install-deps: nfs-rs $nfsrs_version present"
        return 0
    fi
    echo "install-deps: installing nfs-rs $nfsrs_version into $nfsrs_venv"
    python3 -m venv "$nfsrs_venv"
    "$nfsrs_venv/bin/python" -m pip install -q "nfs-rs==$nfsrs_version"
}

missing=()
for pkg in "${packages[@]}"; do
    # `dpkg -s` succeeds for packages that were removed but left config files behind, so the
    # Status line is what tells an installed package apart.
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q '^install ok installed$'; then
        missing+=("$pkg")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    echo "install-deps: all ${#packages[@]} packages present"
    install_nfsrs
    exit 0
fi

echo "install-deps: missing: ${missing[*]}"
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
    if ! command -v sudo >/dev/null; then
        echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
        exit 1
    fi
    sudo_cmd=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "install-deps: installed: ${missing[*]}"
install_nfsrs
