package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
)

// TestWriteDeps: the dependency table under a server, with its owner
// marked when observed (in another namespace too), a destination no
// namespace of the host listens on said to be on another host, and no time per round trip on a multiplexed
// connection, nor on a unix socket.
func TestWriteDeps(t *testing.T) {
	var b bytes.Buffer
	writeDeps(&b, []app.Dependency{
		{Addr: "10.0.0.1:7300", Owner: "backend (pid 7)", Observed: true, Conns: 4, Busy: 0.98, RoundTripsPerSec: 196, RoundTrip: 20300 * time.Microsecond, SegsOutPerSec: 196, SegsInPerSec: 196, BytesInPerSec: 2048},
		{Addr: "10.0.0.9:6379", Conns: 1, Busy: 0.9, RoundTripsPerSec: 900, Pipelined: 0.6},
		{Addr: "127.0.0.1:9000", Owner: "php-fpm (pid 9)", Observed: true, New: 35},
		{Addr: "10.0.2.2:5432", Owner: "postgres (pid 9, netns db)", Observed: true, Conns: 2},
		{Addr: "192.0.2.7:443", OtherHost: true, Conns: 1},
		{Addr: "unix:/run/php/php8.2-fpm.sock", Owner: "php-fpm (pid 11)", Observed: true, Conns: 3, New: 40, Untimed: app.UnixUntimed, Unread: 0.62},
		{Addr: "unix:@short", New: 2, Untimed: app.UnixUntimed},
	}, "during the load")
	// Columns are aligned to the widest cell: compare words.
	got := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"127.0.0.1:9000 php-fpm (pid 9) * - 35 - - a connection per request, too short to time", "10.0.0.1:7300 backend (pid 7) * 4", "98%", "20.3ms", "196/196", "0 B/2.0 KiB", "n/a (60% pipelined)",
		"10.0.2.2:5432 postgres (pid 9, netns db) *", "192.0.2.7:443 another host",
		// A unix socket: no time, the unread share as the lower bound it is.
		"unix:/run/php/php8.2-fpm.sock php-fpm (pid 11) * 3 40 ≥ 62% (unread there) - not timed (unix socket: no tcp_info) - -",
		"unix:@short - - 2 - - not timed (unix socket: no tcp_info) - -"} {
		if !strings.Contains(got, want) {
			t.Errorf("no %q in\n%s", want, got)
		}
	}
}
