"""A web service that looks up its backend's name on every request, for
netdoctor's lab.

Each connection gets a thread of its own (http.server's
ThreadingHTTPServer). Every request resolves NAME with
socket.getaddrinfo, through glibc and the namespace's resolv.conf, as an
application does that connects to its backend by name and caches
nothing. When a query is lost, glibc waits its timeout (5 s by default)
before it asks again, and the request waits with it.

Usage: python3 lookup.py --addr IP:PORT --name NAME

It answers 200 with the address found, or 502 when the name does not
resolve. It prints "ready IP:PORT" once it listens (port 0 picks a free
one), and runs until it is killed.
Standard library only (Python 3.11).
"""

import argparse
import http.server
import socket
import sys


class Server(http.server.ThreadingHTTPServer):
    # socketserver's default listen backlog is 5: a burst of new
    # connections would overflow it, a fault this service is not about.
    request_queue_size = 1024
    daemon_threads = True

    def server_bind(self):
        # http.server's own looks its address up (socket.getfqdn, a PTR
        # query) before it listens: through this lab's lossy resolver
        # that alone can take 10 s and more. The fault is the lookups per
        # request; the service starts without one.
        import socketserver
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name, self.server_port = host, port


def handler(name):
    class Handler(http.server.BaseHTTPRequestHandler):
        # HTTP/1.1: connections are kept alive, as the load's are.
        protocol_version = "HTTP/1.1"
        # Buffered: head and body leave in one write when the request is
        # done. http.server's default sends them in two, and with Nagle on
        # the second waits ~40 ms for the client's delayed ACK of the first
        # (nginx-nagle's fault, not this service's).
        wbufsize = -1

        def do_GET(self):
            try:
                addrs = socket.getaddrinfo(name, 80, type=socket.SOCK_STREAM)
                status, body = 200, "backend %s at %s\n" % (name, addrs[0][4][0])
            except socket.gaierror as e:
                status, body = 502, "cannot resolve %s: %s\n" % (name, e)
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format, *args):
            # No line per request: the log would cost more than the page.
            pass

    return Handler


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--addr", required=True, help="IP:PORT to listen on")
    p.add_argument("--name", required=True, help="the backend's name, looked up per request")
    args = p.parse_args()
    host, _, port = args.addr.rpartition(":")
    srv = Server((host, int(port)), handler(args.name))
    print("ready %s:%d" % srv.server_address[:2], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
