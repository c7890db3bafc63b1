package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/poll"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// pyCeiling is a single-threaded keep-alive HTTP server that accepts at
// most argv[3] connections at once (it stops polling its listener at
// the ceiling, as haproxy's maxconn or Node's server.maxConnections
// do), with a backlog of 20, answering each request after 50 ms.
const pyCeiling = `import selectors, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
limit = int(sys.argv[3])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, int(port)))
s.listen(20)
s.setblocking(False)
sel = selectors.EpollSelector()
sel.register(s, selectors.EVENT_READ)
listening = True
conns, due = {}, []
open(sys.argv[2], "w").close()
while True:
    if listening and len(conns) >= limit:
        sel.unregister(s); listening = False
    elif not listening and len(conns) < limit:
        sel.register(s, selectors.EVENT_READ); listening = True
    timeout = max(0, due[0][0] - time.monotonic()) if due else None
    for key, _ in sel.select(timeout):
        if key.fileobj is s:
            try:
                c, _ = s.accept()
            except BlockingIOError:
                continue
            c.setblocking(False)
            conns[c] = b""
            sel.register(c, selectors.EVENT_READ)
            continue
        c = key.fileobj
        try:
            d = c.recv(4096)
        except OSError:
            d = b""
        if not d:
            sel.unregister(c); del conns[c]; c.close()
            due = [x for x in due if x[1] is not c]
            continue
        conns[c] += d
        while b"\r\n\r\n" in conns[c]:
            _, conns[c] = conns[c].split(b"\r\n\r\n", 1)
            due.append((time.monotonic() + 0.05, c))
    now = time.monotonic()
    while due and due[0][0] <= now:
        _, c = due.pop(0)
        if c in conns:
            try:
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
            except OSError:
                pass
`

// TestRunConnCeiling: a Python server that accepts at most 20
// connections under a load of 48 keeps 20 while the rest overflow its
// queue and it idles: its own limit is named with the number, without a
// configuration parser. With a ceiling of 200, nothing.
func TestRunConnCeiling(t *testing.T) {
	e := newLab(t)
	for i, c := range []struct {
		limit int
		want  bool
	}{{20, true}, {200, false}} {
		addr := fmt.Sprintf("%s:%d", e.ServerIP, 8100+i)
		ready := filepath.Join(e.Dir, fmt.Sprintf("ceiling%d.ready", i))
		p, err := e.Start(e.ServerNS, fmt.Sprintf("ceiling%d", i), "python3", "-c", pyCeiling, addr, ready, fmt.Sprint(c.limit))
		labMust(t, err)
		poll.Until(t, 10e9, func() error { _, err := os.Stat(ready); return err })
		_, r, text := runBundle(t, e, "http://"+addr+"/", "-c 48 -d 3s")
		p.Stop()
		t.Logf("verdict %s", r.Verdict)
		var found bool
		for _, f := range r.Findings {
			if f.ID != rules.AppConnectionLimit {
				continue
			}
			found = true
			t.Logf("%s: %s; %v; %v", f.ID, f.Title, f.Evidence, f.Actions)
			if want := fmt.Sprintf("accepts at most %d connections", c.limit); !strings.Contains(f.Title, want) {
				t.Errorf("title %q, want %q", f.Title, want)
			}
		}
		if found != c.want {
			t.Errorf("ceiling %d: %s found = %v, want %v\n%s", c.limit, rules.AppConnectionLimit, found, c.want, text)
		}
	}
}
