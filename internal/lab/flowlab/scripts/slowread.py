"""Slow receivers, for netdoctor's lab: CONNS connections to a streaming
service, each with a receive buffer of RCVBUF bytes (SO_RCVBUF, set
before connecting, so that the window TCP offers stays small) reading
READ bytes every EVERY seconds, for FOR seconds: clients that cannot keep
up, whose full sockets refuse what the server sends.

Usage: python3 slowread.py --to IP:PORT [--conns 8] [--rcvbuf 4096]
       [--read 1024] [--every 0.05] [--for 10] [--get PATH]

With --get each connection first asks for PATH (an HTTP/1.0 GET), for a
server that answers requests (nginx and a large file) rather than one
that streams to whoever connects.

It prints "connected N" once its connections are open, "done" at the
end. Standard library only (Python 3.11).
"""

import argparse
import socket
import sys
import threading
import time


def reader(s, size, every, until):
    try:
        while time.monotonic() < until:
            s.recv(size)
            time.sleep(every)
    except OSError:
        pass
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--to", required=True)
    ap.add_argument("--conns", type=int, default=8)
    ap.add_argument("--rcvbuf", type=int, default=4096)
    ap.add_argument("--read", type=int, default=1024)
    ap.add_argument("--every", type=float, default=0.05)
    ap.add_argument("--for", dest="dur", type=float, default=10)
    ap.add_argument("--get", default="")
    a = ap.parse_args()
    host, port = a.to.rsplit(":", 1)
    until = time.monotonic() + a.dur
    socks = []
    for _ in range(a.conns):
        s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
        s.settimeout(10)
        s.connect((host.strip("[]"), int(port)))
        if a.get:
            s.sendall(b"GET %s HTTP/1.0\r\nHost: lab\r\n\r\n" % a.get.encode())
        socks.append(s)
    print("connected %d" % len(socks), flush=True)
    ts = [threading.Thread(target=reader, args=(s, a.read, a.every, until)) for s in socks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("done", flush=True)


if __name__ == "__main__":
    sys.exit(main())
