"""Drive PyPI's nfs-rs NFSv4.1 client against a server (crates/cli/tests/e2e_nfs4.rs runs it).

    python nfsrs_client.py URL

Mounts with `version=4.1`, then creates a directory and a file, writes it (the client makes
every write durable before returning), reads it back, lists the directory, renames, removes
and leaves `kept.txt` behind for the caller to check on the server's disk. Prints one line per
step; exits non-zero (with the exception) on the first failure.

The nfs-rs Python facade negotiates byte-range locking (`capabilities.locks`) but offers no
call to take a lock (its API.md: "no public Python locking methods"), so for locks this checks
the negotiated capability; eagernfs's own tests (crates/server/tests/nfs4.rs) take and test
NFSv4.1 locks on the wire.
"""
import sys

import nfs_rs

url = sys.argv[1]
payload = bytes(range(256)) * 4096  # 1 MiB: several WRITEs at the negotiated size
with nfs_rs.Client.connect(url) as c:
    assert c.version == "4.1", c.version
    caps = c.capabilities
    print("mounted", c.version, caps)
    assert caps.locks, "the server offers byte-range locks"
    assert caps.callbacks, "the server probed a back channel"
    c.mkdir("work/sub", parents=True, exist_ok=False, mode=0o755)
    print("mkdir")
    with c.open("work/sub/data.bin", "wb") as f:
        f.write(payload)
    print("create+write")
    with c.open("work/sub/data.bin", "rb") as f:
        back = f.read()
    assert back == payload, f"read back {len(back)} bytes, differing"
    info = c.stat("work/sub/data.bin")
    assert info.size == len(payload), info.size
    print("read", len(back))
    names = sorted(c.listdir("work/sub"))
    assert names == ["data.bin"], names
    print("list", names)
    c.rename("work/sub/data.bin", "work/sub/renamed.bin")
    assert sorted(c.listdir("work/sub")) == ["renamed.bin"]
    print("rename")
    c.unlink("work/sub/renamed.bin")
    assert c.listdir("work/sub") == []
    c.rmdir("work/sub")
    assert not c.exists("work/sub")
    print("remove")
    with c.open("work/kept.txt", "wb") as f:
        f.write(b"nfs-rs was here\n")
    print("ok")
