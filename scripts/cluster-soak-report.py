#!/usr/bin/env python3
"""The arithmetic of scripts/cluster-soak.sh: one round's client logs into rows, rows into a summary.

  cluster-soak-report.py header              the TSV header
  cluster-soak-report.py round ROUND_DIR     one row per client of the round (TSV, no header)
  cluster-soak-report.py clean ROUND_DIR     exit 1 if the round found a failure
  cluster-soak-report.py brief               (rows on stdin) a one-line summary of a round
  cluster-soak-report.py summary ROWS CMD N [LIBNFS_VERIFIER]
                                             README.md for the output directory (LIBNFS_VERIFIER:
                                             on or off, which libnfs write path ran; see below)

A round directory holds `round` ("r victim kill_ms killed_ms listen_ms": before and after
`heads.sh kill`, and when the new head listened), `clients` ("i kind head
fsync_every file" per line), and per client cI.log (soakclient's log) and cI.verify (its file read
back: "seq offset length ok|bad|short|error" per acknowledged write).

resent_bytes: blocks a libnfs client wrote again because a COMMIT's verifier differed from the
one their UNSTABLE WRITE returned (soakclient's X lines; NFSv3's rule, which libnfs 4.0's
nfs_fsync does not follow; see tests/clients/soakclient.c). Always 0 for mounts and for
libnfs clients run with SOAK_LIBNFS_VERIFIER=0 (cluster-soak.sh --libnfs-verifier off).
"""
import statistics
import sys
from pathlib import Path

BLOCK = 16384
ESTALE = 116
COLUMNS = [
    "round", "victim", "new_head_listening_ms", "client", "kind", "head", "fsync_every", "affected", "resume_ms",
    "max_gap_ms", "lock_resume_ms", "lock_max_gap_ms", "estale", "errors", "writes", "committed_bytes", "committed_lost_bytes",
    "prekill_uncommitted_bytes", "prekill_uncommitted_present_bytes", "readback_bad",
    "lock_holds", "lock_held_across_kill", "lock_busy", "lock_errors", "double_grants", "verified", "resent_bytes",
]


def parse_log(path):
    ev = {"W": [], "S": [], "R": [], "L": [], "B": [], "E": [], "X": []}
    try:
        text = Path(path).read_text()
    except OSError:
        return ev
    for line in text.splitlines():
        f = line.split()
        if not f or f[0] not in ev:
            continue
        try:
            if f[0] == "W":
                ev["W"].append((int(f[1]), float(f[2])))
            elif f[0] == "S":
                ev["S"].append((int(f[1]), float(f[2])))
            elif f[0] == "R":
                ev["R"].append((int(f[1]), float(f[2]), f[3]))
            elif f[0] == "L":
                ev["L"].append((float(f[1]), float(f[2])))
            elif f[0] == "B":
                ev["B"].append(float(f[1]))
            elif f[0] == "E":
                ev["E"].append((f[1], int(f[2]), float(f[3])))
            elif f[0] == "X":
                ev["X"].append((int(f[1]), float(f[2])))
        except (IndexError, ValueError):
            pass  # a line cut short by kill -9 of the client (timeout): ignore
    return ev


def resume_gap(times, kill_ms, killed_ms):
    """From the kill to the first success after it (after `heads.sh kill` returned: a reply of
    the dying head does not count), and the longest time between two successes."""
    times = sorted(times)
    after = [t for t in times if t > killed_ms]
    gaps = [b - a for a, b in zip(times, times[1:])]
    return (round(after[0] - kill_ms) if after else "", round(max(gaps)) if gaps else "")


def round_rows(rd):
    rd = Path(rd)
    r, victim, kill_ms, killed_ms, listen_ms = rd.joinpath("round").read_text().split()
    kill_ms, killed_ms = float(kill_ms), float(killed_ms)
    listening = round(float(listen_ms) - kill_ms)
    clients = [line.split() for line in rd.joinpath("clients").read_text().splitlines() if line.strip()]
    logs = {c[0]: parse_log(rd / f"c{c[0]}.log") for c in clients}
    locks = {c[0]: parse_log(rd / f"c{c[0]}.lock.log") for c in clients}
    # Double grants: two clients' lock intervals overlapping (one machine, one clock).
    intervals = sorted((a, b, i) for i, ev in locks.items() for a, b in ev["L"])
    doubles = {i: 0 for i in logs}
    for k, (a, b, i) in enumerate(intervals):
        for a2, _b2, i2 in intervals[k + 1:]:
            if a2 >= b:
                break
            if i2 != i:
                doubles[i2] += 1
    rows = []
    for i, kind, head, fsync_every, _file in clients:
        ev, lk = logs[i], locks[i]
        mount = kind == "mount"
        # Data calls that reached a server: for a mount, fsync (or an O_SYNC write); its cache
        # may answer writes and reads. For libnfs every call does.
        ok_times = [t for _, t in ev["S"]]
        if not mount:
            ok_times += [t for _, t in ev["W"]] + [t for _, t, _ in ev["R"]] + [t for _, t in ev["X"]]
        resume, max_gap = resume_gap(ok_times, kill_ms, killed_ms)
        # Lock calls answered (granted or refused because another holds it).
        lock_resume, lock_gap = resume_gap([a for a, _ in lk["L"]] + lk["B"], kill_ms, killed_ms)
        # What the client was told: committed = covered by a later successful fsync/COMMIT.
        synced = max((s for s, _ in ev["S"]), default=-1)
        synced_before_kill = max((s for s, t in ev["S"] if t < killed_ms), default=-1)
        status = {}
        vpath = rd / f"c{i}.verify"
        verified = vpath.exists() and vpath.stat().st_size > 0
        if vpath.exists():
            for line in vpath.read_text().splitlines():
                f = line.split()
                if len(f) == 4:
                    status[int(f[0])] = f[3]
        committed = lost = pre = pre_present = 0
        for seq, t in ev["W"]:
            ok = status.get(seq) == "ok"
            if seq <= synced:
                committed += BLOCK
                lost += 0 if ok else BLOCK
            if t < killed_ms and seq > synced_before_kill:
                pre += BLOCK
                pre_present += BLOCK if ok else 0
        rows.append([
            r, victim, listening, i, kind, head, fsync_every, int(head == victim), resume, max_gap, lock_resume, lock_gap,
            sum(1 for _, e, _ in ev["E"] + lk["E"] if e == ESTALE), len(ev["E"]), len(ev["W"]), committed, lost,
            pre, pre_present, sum(1 for _, _, s in ev["R"] if s != "ok"), len(lk["L"]), sum(1 for a, b in lk["L"] if a < kill_ms and b > killed_ms), len(lk["B"]),
            sum(1 for op, _, _ in lk["E"] if op in ("lock", "unlock")), doubles[i], int(verified),
            BLOCK * len(ev["X"]),
        ])
    return rows


def is_failure(row):
    d = dict(zip(COLUMNS, row))
    return (d["estale"] or d["committed_lost_bytes"] or d["double_grants"] or d["readback_bad"]
            or d["prekill_uncommitted_present_bytes"] != d["prekill_uncommitted_bytes"]
            or d["resume_ms"] == "" or not d["verified"])


def read_rows(lines):
    rows = []
    for line in lines:
        f = line.rstrip("\n").split("\t")
        if len(f) != len(COLUMNS) or f[0] == "round":
            continue
        d = dict(zip(COLUMNS, f))
        for k in COLUMNS:
            if k not in ("kind",) and d[k] != "":
                d[k] = int(d[k])
        rows.append(d)
    return rows


def fmt_ms(xs):
    if not xs:
        return "–"
    return f"{statistics.median(xs) / 1000:.2f} / {max(xs) / 1000:.2f}"


def summary_table(rows):
    out = ["| clients | rows | data: resume after the kill, s (median / max) | no data call succeeded after the kill | data: longest pause, s (median / max) | locks: first answer after the kill, s (median / max) | locks: longest pause, s (median / max) | ESTALE | data errors | committed bytes | committed bytes lost | unsynced at the kill: bytes / present afterwards | read-back mismatches | lock holds / across the kill / refused | lock errors | double grants | resent after a verifier change, bytes |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    groups = []
    for kind in ("mount", "libnfs"):
        for fs in sorted({d["fsync_every"] for d in rows if d["kind"] == kind}):
            for aff in (1, 0):
                sel = [d for d in rows if d["kind"] == kind and d["fsync_every"] == fs and d["affected"] == aff]
                if sel:
                    how = "fsync every 4" if fs else "O_SYNC"
                    where = "on the killed head" if aff else "on other heads"
                    groups.append((f"{kind}, {how}, {where}", sel))
    groups.append(("all", rows))
    for name, sel in groups:
        res = [d["resume_ms"] for d in sel if d["resume_ms"] != ""]
        gaps = [d["max_gap_ms"] for d in sel if d["max_gap_ms"] != ""]
        lres = [d["lock_resume_ms"] for d in sel if d["lock_resume_ms"] != ""]
        lgaps = [d["lock_max_gap_ms"] for d in sel if d["lock_max_gap_ms"] != ""]
        s = lambda k: sum(d[k] for d in sel)
        out.append(
            f"| {name} | {len(sel)} | {fmt_ms(res)} | {sum(1 for d in sel if d['resume_ms'] == '')} | {fmt_ms(gaps)} | {fmt_ms(lres)} | {fmt_ms(lgaps)} | "
            f"{s('estale')} | {s('errors')} | {s('committed_bytes')} | {s('committed_lost_bytes')} | "
            f"{s('prekill_uncommitted_bytes')} / {s('prekill_uncommitted_present_bytes')} | {s('readback_bad')} | "
            f"{s('lock_holds')} / {s('lock_held_across_kill')} / {s('lock_busy')} | {s('lock_errors')} | {s('double_grants')} | "
            f"{s('resent_bytes')} |")
    return "\n".join(out)


def libnfs_mode_text(mode):
    """What the libnfs clients that fsync every 4 writes did (cluster-soak.sh --libnfs-verifier)."""
    if mode == "off":
        return ("libnfs clients with fsync every 4 ran libnfs 4.0's plain nfs_pwrite/nfs_fsync "
                "(--libnfs-verifier off): UNSTABLE writes, and a COMMIT whose verifier is never "
                "compared with the WRITEs' (libnfs ignores it), so writes a killed head acknowledged "
                "but never committed can be lost although the next fsync succeeds.")
    return ("libnfs clients with fsync every 4 followed NFSv3's verifier rule themselves "
            "(--libnfs-verifier on, the default): UNSTABLE WRITEs and COMMITs through libnfs's raw "
            "layer, blocks whose WRITE verifier differs from the COMMIT's written again (the last "
            "column) and committed again before the fsync counts; libnfs 4.0's own nfs_fsync "
            "ignores the verifier.")


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "header":
        print("\t".join(COLUMNS))
    elif cmd == "round":
        for row in round_rows(sys.argv[2]):
            print("\t".join(str(x) for x in row))
    elif cmd == "clean":
        sys.exit(1 if any(is_failure(row) for row in round_rows(sys.argv[2])) else 0)
    elif cmd == "brief":
        rows = read_rows(sys.stdin)
        aff = [d["resume_ms"] for d in rows if d["affected"] and d["resume_ms"] != ""]
        print(f"resume max {max(aff) / 1000 if aff else float('nan'):.2f} s on the killed head; "
              f"estale {sum(d['estale'] for d in rows)}, committed lost {sum(d['committed_lost_bytes'] for d in rows)} B, "
              f"unsynced {sum(d['prekill_uncommitted_bytes'] for d in rows)} B / present {sum(d['prekill_uncommitted_present_bytes'] for d in rows)} B, "
              f"locks {sum(d['lock_holds'] for d in rows)} (errors {sum(d['lock_errors'] for d in rows)}), "
              f"double grants {sum(d['double_grants'] for d in rows)}, "
              f"resent {sum(d['resent_bytes'] for d in rows)} B")
    elif cmd == "summary":
        rows = read_rows(Path(sys.argv[2]).read_text().splitlines())
        rounds = len({d["round"] for d in rows})
        print(f"# Cluster soak: {rounds} rounds, a head killed with kill -9 in each\n")
        print(f"Command: `{sys.argv[3]}` (rounds with a failure: {sys.argv[4]}; their logs are "
              "failed-round-N/ in failed-rounds.tar.xz). Rows: rounds.tsv.gz (one per round and client; columns explained in "
              "scripts/cluster-soak-report.py).\n\n"
              "- Data resume: from the kill to the client's first data call that succeeded after it "
              "(for a mount, an fsync or O_SYNC write: its cache may answer writes and reads; for "
              "libnfs any call). Longest pause: the longest time between two such successes in the round.\n"
              "- Locks (mounts only: a second process per mount, fcntl F_SETLK on byte 0 of one shared "
              "file, held up to --hold-ms): first answer (granted, or refused because another holds "
              "it) after the kill, and the longest time without an answer; during a grace period new "
              "locks wait (NFSv3's rule), so this includes the grace period.\n"
              "- Committed: acknowledged and then covered by a successful fsync/COMMIT (or FILE_SYNC). "
              "Unsynced at the kill: acknowledged before the kill, not yet covered by a commit then.\n"
              "- Double grants: pairs of lock holds of two clients that overlap in time (the holder's "
              "own view: from F_SETLK's return to just before its unlock; one machine, one clock).\n"
              f"- {libnfs_mode_text(sys.argv[5] if len(sys.argv) > 5 else 'on')}\n")
        print(summary_table(rows))
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
