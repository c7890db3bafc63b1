"""A streaming service, for netdoctor's lab: every connection it accepts
is sent CHUNK bytes at a time, as fast as the client takes them, until
the client goes away (a download, a video, a log tail).

Usage: python3 stream.py --addr IP:PORT [--chunk 65536]

It prints "ready IP:PORT" once it listens and runs until it is killed.
Standard library only (Python 3.11).
"""

import argparse
import socket
import sys
import threading

def serve(conn, chunk):
    data = b"x" * chunk
    try:
        while True:
            conn.sendall(data)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--addr", required=True)
    ap.add_argument("--chunk", type=int, default=65536)
    a = ap.parse_args()
    host, port = a.addr.rsplit(":", 1)
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host.strip("[]"), int(port)))
    s.listen(512)
    print("ready %s:%d" % (host, s.getsockname()[1]), flush=True)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn, a.chunk), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
