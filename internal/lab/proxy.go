package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"
)

// Proxy is a home-made HTTP reverse proxy, as many services have in
// front of their backend: every request goes to Backend. Without
// Keepalive it opens a new connection per request and closes it itself
// once the response is read, so the connection's TIME_WAIT stays on the
// proxy's side and holds one of its local ports for 60 s; when connect
// finds no free port (EADDRNOTAVAIL) the client gets a 502. With
// Keepalive, connections to the backend are kept in a pool and reused.
type Proxy struct {
	Listen    string // "ip:port"
	Backend   string // "ip:port"
	Keepalive bool
}

// proxyIdle is how many idle backend connections the pool keeps: more
// than the lab's loads hold open at once.
const proxyIdle = 256

// ServeProxy proxies until ctx ends, printing "ready" to out once
// listening. Errors reaching the backend are logged to errs, one line
// each, as httputil.ReverseProxy logs them.
func ServeProxy(ctx context.Context, p Proxy, out, errs io.Writer) error {
	ln, err := net.Listen("tcp", p.Listen)
	if err != nil {
		return err
	}
	h := &proxyHandler{backend: p.Backend, log: log.New(errs, "", log.LstdFlags)}
	if p.Keepalive {
		h.idle = make(chan *backendConn, proxyIdle)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second, ErrorLog: h.log}
	fmt.Fprintln(out, "ready")
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	h.closeIdle()
	return nil
}

type proxyHandler struct {
	backend string
	idle    chan *backendConn // nil: a new connection per request
	log     *log.Logger
}

// backendConn is one connection to the backend and its reader, which
// may hold the start of what comes next.
type backendConn struct {
	net.Conn
	br *bufio.Reader
}

// hopHeaders are per connection, not passed on (RFC 9110 §7.6.1).
var hopHeaders = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

func (h *proxyHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Close = false
	for _, k := range hopHeaders {
		out.Header.Del(k)
	}
	c, resp, err := h.roundTrip(out)
	if err != nil {
		h.log.Printf("http: proxy error: %v", err)
		http.Error(w, "bad gateway: "+err.Error(), http.StatusBadGateway)
		return
	}
	for _, k := range hopHeaders {
		resp.Header.Del(k)
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, err = io.Copy(w, resp.Body)
	resp.Body.Close()
	h.put(c, err == nil && !resp.Close)
}

// roundTrip sends req on a backend connection and reads the response's
// head. A connection taken from the pool may have been closed by the
// backend meanwhile: a body-less request is then tried once more on a
// new one.
func (h *proxyHandler) roundTrip(req *http.Request) (*backendConn, *http.Response, error) {
	for try := 0; ; try++ {
		c, reused, err := h.get(req.Context())
		if err != nil {
			return nil, nil, err
		}
		if err = req.Write(c); err == nil {
			var resp *http.Response
			if resp, err = http.ReadResponse(c.br, req); err == nil {
				return c, resp, nil
			}
		}
		c.Close()
		if !reused || try > 0 || req.Body != nil && req.Body != http.NoBody {
			return nil, nil, err
		}
	}
}

// get takes an idle connection from the pool, or dials a new one.
func (h *proxyHandler) get(ctx context.Context) (c *backendConn, reused bool, err error) {
	select {
	case c := <-h.idle: // never ready when idle is nil
		return c, true, nil
	default:
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", h.backend)
	if err != nil {
		return nil, false, err
	}
	return &backendConn{Conn: conn, br: bufio.NewReader(conn)}, false, nil
}

// put returns c to the pool when it can serve another request, or
// closes it: without a pool, the proxy closes first, and TIME_WAIT is
// left on its side.
func (h *proxyHandler) put(c *backendConn, reusable bool) {
	if reusable && h.idle != nil {
		select {
		case h.idle <- c:
			return
		default:
		}
	}
	c.Close()
}

func (h *proxyHandler) closeIdle() {
	for {
		select {
		case c := <-h.idle:
			c.Close()
		default:
			return
		}
	}
}
