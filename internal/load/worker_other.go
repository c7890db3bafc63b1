//go:build !linux

package load

import (
	"context"
	"net"
)

// runWorker uses goroutines where there is no epoll.
func (e *engine) runWorker(id int) float64 {
	var d net.Dialer
	return e.runGoroutines(id, func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	})
}
