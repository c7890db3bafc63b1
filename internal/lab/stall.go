package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Stall is a server with a fault no rule names: it answers at once,
// except every Every-th request, which it holds for Hold first (a lock
// taken by a periodic job, a garbage collector's pause, a cache refill
// made inline). Nothing in the kernel's counters points at it; the
// clients see the stalls. Every 0 never stalls.
type Stall struct {
	Addr  string // "ip:port"
	Every int
	Hold  time.Duration
}

// ServeStall serves until ctx ends, printing "ready" to out once
// listening.
func ServeStall(ctx context.Context, s Stall, out io.Writer) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.handler(), ReadHeaderTimeout: 30 * time.Second}
	fmt.Fprintln(out, "ready")
	go func() { <-ctx.Done(); srv.Close() }()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func (s Stall) handler() http.Handler {
	var n atomic.Uint64
	body := "hello from the stalling server\n"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if k := n.Add(1); s.Every > 0 && k%uint64(s.Every) == 0 {
			t := time.NewTimer(s.Hold)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		io.WriteString(w, body)
	})
}
