#!/usr/bin/env python3
"""Hostile and careless clients for scripts/bench-floods.sh (issue 8, point 3). Each mode runs
for at most --seconds and opens at most --connections sockets; everything goes to 127.0.0.0/8.

  connections  open N connections from one address, make one call on each, then hold them idle
  many-hosts   the same from N distinct 127.2.x.y addresses (limits per host do not apply)
  slowloris    N connections each sending a record mark for a 1000-byte call, then a byte a second
  oversized    connections whose record marks claim 2 GiB, as fast as the server closes them
  churn        connect, send one NULL call, close, as fast as possible
  blast        one host pipelining NULL calls on 8 connections as fast as the server answers

Prints one line: `held=N opened=N refused=N calls=N` (held: connections the server still had
open at the end, as far as this side can tell)."""
import argparse
import os
import socket
import struct
import threading
import time

NULL_CALL = struct.pack(">IIIIIIIIII", 1, 0, 2, 100003, 3, 0, 0, 0, 0, 0)


def record(body):
    return struct.pack(">I", 0x80000000 | len(body)) + body


def connect(host, port, src=None):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if src:
        s.bind((src, 0))
    s.settimeout(5)
    s.connect((host, port))
    return s


def alive(s):
    """True if the server has not closed `s` (non-blocking peek)."""
    try:
        s.setblocking(False)  # with a timeout set, recv would wait for data first
        return s.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False


def hold(args, sources):
    socks, refused = [], 0
    deadline = time.time() + args.seconds
    for i in range(args.connections):
        if time.time() > deadline:
            break
        try:
            s = connect(args.host, args.port, sources(i))
            # One call, as a client that mounted and went quiet: an idle connection, not a
            # slow one (the server closes those after its idle timeout, minutes).
            s.sendall(record(NULL_CALL))
            if not s.recv(64):
                raise OSError("closed")
            socks.append(s)
        except OSError:
            refused += 1
    opened = len(socks)
    while time.time() < deadline:
        time.sleep(0.2)
    held = sum(1 for s in socks if alive(s))
    for s in socks:
        s.close()
    return dict(held=held, opened=opened, refused=refused + opened - held, calls=0)


def slowloris(args):
    socks = []
    deadline = time.time() + args.seconds
    for _ in range(args.connections):
        try:
            s = connect(args.host, args.port)
            s.sendall(struct.pack(">I", 0x80000000 | 1000))
            socks.append(s)
        except OSError:
            pass
    opened = len(socks)
    while time.time() < deadline:
        for s in socks:
            try:
                s.send(b"\0")
            except OSError:
                pass
        time.sleep(1)
    held = sum(1 for s in socks if alive(s))
    for s in socks:
        s.close()
    return dict(held=held, opened=opened, refused=opened - held, calls=0)


def oversized(args):
    opened = closed = 0
    deadline = time.time() + args.seconds
    while time.time() < deadline and opened < args.connections:
        try:
            s = connect(args.host, args.port)
            opened += 1
            s.sendall(struct.pack(">I", 0x80000000 | 0x7FFFFFFF) + b"\0" * 4096)
            s.settimeout(2)
            if s.recv(1) == b"":
                closed += 1
        except OSError:
            closed += 1
        finally:
            s.close()
    return dict(held=0, opened=opened, refused=closed, calls=0)


def churn(args):
    opened = calls = 0
    deadline = time.time() + args.seconds
    while time.time() < deadline and opened < args.connections:
        try:
            s = connect(args.host, args.port)
            opened += 1
            s.sendall(record(NULL_CALL))
            if s.recv(64):
                calls += 1
            s.close()
        except OSError:
            pass
    return dict(held=0, opened=opened, refused=0, calls=calls)


def blast(args):
    total = [0]
    lock = threading.Lock()
    deadline = time.time() + args.seconds
    batch = record(NULL_CALL) * 64

    def one():
        n = 0
        try:
            s = connect(args.host, args.port)
            s.settimeout(5)
            while time.time() < deadline:
                s.sendall(batch)
                # A NULL reply is 28 bytes: mark, xid, REPLY, MSG_ACCEPTED, empty verifier, SUCCESS.
                want, got = 64 * 28, 0
                while got < want:
                    data = s.recv(65536)
                    if not data:
                        return
                    got += len(data)
                n += 64
        except OSError:
            pass
        finally:
            with lock:
                total[0] += n

    threads = [threading.Thread(target=one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return dict(held=0, opened=8, refused=0, calls=total[0])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["connections", "many-hosts", "slowloris", "oversized", "churn", "blast"])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--connections", type=int, default=1000)
    p.add_argument("--seconds", type=float, default=15)
    a = p.parse_args()
    if not a.host.startswith("127."):
        raise SystemExit("flood.py only talks to loopback (127.0.0.0/8)")
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass
    if a.mode == "connections":
        r = hold(a, lambda i: None)
    elif a.mode == "many-hosts":
        r = hold(a, lambda i: f"127.2.{(i // 250) % 250}.{i % 250 + 1}")
    elif a.mode == "slowloris":
        r = slowloris(a)
    elif a.mode == "oversized":
        r = oversized(a)
    elif a.mode == "churn":
        r = churn(a)
    else:
        r = blast(a)
    print(" ".join(f"{k}={v}" for k, v in r.items()), flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
