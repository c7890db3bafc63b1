//go:build !linux

package load

import (
	"context"
	"net"
)

// eventLoop says that http:// runs on goroutines here: a script's
// request, response and delay functions need the event loop.
const eventLoop = false

// runWorker uses goroutines where there is no epoll.
func (e *engine) runWorker(id int) float64 {
	var d net.Dialer
	return e.runGoroutines(id, func(ctx context.Context, addr string) (net.Conn, error) {
		return d.DialContext(ctx, "tcp", addr)
	})
}
