package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/poll"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// pyStallLog is a threaded Python service whose every tenth request
// waits 2 s on an upstream it names only in its own log (the logging
// module's FileHandler: opened for appending), argv[2].
const pyStallLog = `import http.server, logging, sys, threading, time
host, port = sys.argv[1].rsplit(":", 1)
logging.basicConfig(filename=sys.argv[2], format="%(asctime)s %(levelname)s %(message)s", level=logging.INFO)
lock, n = threading.Lock(), [0]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        with lock:
            n[0] += 1
            k = n[0]
        if k % 10 == 0:
            logging.warning("upstream inventory-svc did not answer in %dms, request %d held", 2000 + k % 7, k)
            time.sleep(2)
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")
    def log_message(self, *a):
        pass
s = http.server.ThreadingHTTPServer((host, int(port)), H)
open(sys.argv[3], "w").close()
s.serve_forever()
`

// testRunServerLogWords: issue 38's "the server's own words". A service
// holds every tenth request 2 s on an upstream netdoctor cannot see (no
// connection to it, nothing in the kernel), and says so only in its own
// log, a file no configuration netdoctor reads names: found from the
// descriptor the server holds open for appending, its lines of the run
// grouped by shape, and shown with their count and a line beside the
// unexplained distress they coincide with. A Go server (its log
// package), then Python's logging.
func testRunServerLogWords(t *testing.T) {
	labNeeds(t)
	for _, kind := range []string{"go", "python"} {
		t.Run(kind, func(t *testing.T) {
			e := newLab(t)
			addr := e.ServerIP + ":8300"
			logPath := filepath.Join(e.Dir, kind+"-service.log")
			switch kind {
			case "go":
				startServe(t, e.ServerNS.Name, "ND_SERVER=stalllog", "ND_ADDR="+addr, "ND_LOG="+logPath)
			case "python":
				ready := filepath.Join(e.Dir, "py.ready")
				_, err := e.Start(e.ServerNS, "stalllog", "python3", "-c", pyStallLog, addr, logPath, ready)
				labMust(t, err)
				poll.Until(t, 10e9, func() error { _, err := os.Stat(ready); return err })
			}
			_, r, text := runBundle(t, e, "http://"+addr+"/", "-c 20 -d 3s --timeout 5s")
			f := findActive(r, rules.UnexplainedDistress)
			if f == nil {
				t.Fatalf("no unexplained distress:\n%s", text)
			}
			var said *report.Item
			for i, it := range f.Evidence {
				if it.Source == "log" && strings.Contains(it.Text, logPath) {
					said = &f.Evidence[i]
				}
			}
			// The shape masks the time stamps as well as the numbers.
			want := `"N/N/N N WARN upstream inventory-svc did not answer in Nms, request N held"`
			if kind == "python" {
				want = `"N-N-N N,N WARNING upstream inventory-svc did not answer in Nms, request N held"`
			}
			if said == nil || !strings.Contains(said.Text, want) || !strings.Contains(said.Text, "(first: ") {
				t.Fatalf("the server's words are not beside the distress: %s\n%+v", want, f.Evidence)
			}
			t.Logf("measured: %s", said.Text)
			// The server's section holds the log as found, from which
			// descriptor, with its shapes.
			var found bool
			for _, s := range r.Servers {
				for _, l := range s.Logs {
					if l.Path == logPath && l.Kind == "found" && strings.HasPrefix(l.Source, "fd ") && len(l.TopMessages(1)) == 1 {
						found = true
					}
				}
			}
			if !found {
				t.Errorf("the report's servers do not list the log %s as found: %+v", logPath, r.Servers)
			}
		})
	}
}
