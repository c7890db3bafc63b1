"""A web service with a fixed pool of worker threads, for netdoctor's lab.

One acceptor thread accepts connections and watches the idle ones. When a
connection has a request to read, the acceptor puts it on a queue that
WORKERS threads take from. A worker reads that one request, spends SLEEP
seconds off the CPU (as a handler waiting for its database would),
answers with HTTP/1.1 keep-alive and hands the connection back to the
acceptor. At most WORKERS requests are served at once; the others wait on
the queue with their request still unread in the socket's receive queue,
as in any service whose thread pool is full.

Usage: python3 pool.py --addr IP:PORT [--workers 4] [--sleep 0.05]

It prints "ready IP:PORT" once it listens (port 0 picks a free one), and
runs until it is killed. Standard
library only (Python 3.11).
"""

import argparse
import queue
import selectors
import socket
import sys
import threading
import time

BODY = b"hello from the pool\n"

# A request's head larger than this is refused: nothing in the lab sends one.
MAX_HEAD = 64 * 1024


class Conn:
    """A client connection and what was read from it but not yet served."""

    def __init__(self, sock):
        self.sock = sock
        self.buf = b""


def has_request(buf):
    """Whether buf holds a whole request head."""
    return b"\r\n\r\n" in buf


def serve_one(conn, sleep):
    """Reads one request from conn, answers it, and says whether to keep
    the connection (False: the client closed it or asked to)."""
    while not has_request(conn.buf):
        if len(conn.buf) > MAX_HEAD:
            return False
        data = conn.sock.recv(65536)
        if not data:
            return False
        conn.buf += data
    head, _, rest = conn.buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    version = lines[0].rsplit(" ", 1)[-1]
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip().lower()
    # A body (the lab sends none) is read and dropped, so that the next
    # request starts where it should.
    length = int(headers.get("content-length", "0") or "0")
    while len(rest) < length:
        data = conn.sock.recv(65536)
        if not data:
            return False
        rest += data
    conn.buf = rest[length:]
    if version == "HTTP/1.1":
        keep = headers.get("connection") != "close"
    else:
        keep = headers.get("connection") == "keep-alive"
    # The work: off the CPU, as waiting on a database or another service.
    time.sleep(sleep)
    conn.sock.sendall(
        b"HTTP/1.1 200 OK\r\n"
        b"Content-Type: text/plain\r\n"
        + b"Content-Length: %d\r\n" % len(BODY)
        + (b"" if keep else b"Connection: close\r\n")
        + b"\r\n"
        + BODY
    )
    return keep


def worker(work, back, wake, sleep):
    """Serves one request per connection taken from work, then gives the
    connection back to the acceptor (through back, waking it with wake)."""
    while True:
        conn = work.get()
        try:
            keep = serve_one(conn, sleep)
        except OSError:
            keep = False
        if not keep:
            conn.sock.close()
        elif has_request(conn.buf):
            # A pipelined request, already read: it queues like any other.
            work.put(conn)
        else:
            back.put(conn)
            try:
                wake.send(b"x")
            except BlockingIOError:
                pass  # The acceptor has wake-ups pending already.


def acceptor(listener, work, back, wake_r):
    """Accepts connections and queues each one when it has a request to
    read. It alone touches the selector, so that the workers need no lock."""
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, "listen")
    sel.register(wake_r, selectors.EVENT_READ, "wake")
    while True:
        for key, _ in sel.select():
            if key.data == "listen":
                while True:
                    try:
                        sock, _ = listener.accept()
                    except BlockingIOError:
                        break
                    # Blocking with a timeout: a worker reads a request the
                    # selector said was there, and a client that stalls
                    # mid-request must not hold a worker for ever.
                    sock.settimeout(30)
                    sel.register(sock, selectors.EVENT_READ, Conn(sock))
            elif key.data == "wake":
                try:
                    wake_r.recv(4096)
                except BlockingIOError:
                    pass
                while True:
                    try:
                        conn = back.get_nowait()
                    except queue.Empty:
                        break
                    sel.register(conn.sock, selectors.EVENT_READ, conn)
            else:
                # Readable: a request arrived (or the client closed). It
                # waits for a worker, unread.
                sel.unregister(key.fileobj)
                work.put(key.data)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--addr", required=True, help="IP:PORT to listen on")
    p.add_argument("--workers", type=int, default=4, help="worker threads")
    p.add_argument("--sleep", type=float, default=0.05, help="seconds spent per request, off the CPU")
    args = p.parse_args()
    host, _, port = args.addr.rpartition(":")
    # A deep listen queue: the pool, not the backlog, is this service's limit.
    listener = socket.create_server((host, int(port)), backlog=4096)
    listener.setblocking(False)
    wake_r, wake_w = socket.socketpair()
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    work, back = queue.Queue(), queue.SimpleQueue()
    for _ in range(args.workers):
        threading.Thread(target=worker, args=(work, back, wake_w, args.sleep), daemon=True).start()
    print("ready %s:%d" % listener.getsockname()[:2], flush=True)
    try:
        acceptor(listener, work, back, wake_r)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
