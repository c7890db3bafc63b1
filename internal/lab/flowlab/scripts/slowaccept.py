"""An HTTP service whose acceptor is slow, for netdoctor's lab.

It listens with a small backlog and accepts one connection every EVERY
seconds: when clients come faster, the accept queue overflows (the
kernel's ListenOverflows, and the handshakes it drops). Each connection
accepted gets its request read and a short answer, "Connection: close",
in a thread of its own.

Usage: python3 slowaccept.py --addr IP:PORT [--backlog 8] [--every 0.02]

It prints "ready IP:PORT" once it listens and runs until it is killed.
Standard library only (Python 3.11).
"""

import argparse
import socket
import sys
import threading
import time

BODY = b"ok\n"
ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(BODY), BODY)


def serve(conn):
    try:
        conn.settimeout(10)
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            b = conn.recv(4096)
            if not b:
                return
            head += b
        conn.sendall(ANSWER)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--backlog", type=int, default=8)
    ap.add_argument("--every", type=float, default=0.02)
    a = ap.parse_args()
    host, port = a.addr.rsplit(":", 1)
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host.strip("[]"), int(port)))
    s.listen(a.backlog)
    print("ready %s:%d" % (host, s.getsockname()[1]), flush=True)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
        if a.every > 0:
            time.sleep(a.every)


if __name__ == "__main__":
    sys.exit(main())
