package lab_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/lab/labtest"
)

// get fetches url from inside the client namespace.
func get(t *testing.T, e *lab.Env, url string) string {
	t.Helper()
	ns := e.ClientNS
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		return ns.Dial(ctx, network, addr)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: dial}}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Status + " " + string(b)
}

// TestNginxPHP builds nginx → php-fpm in a lab, fetches a page across the
// veth, and checks that Close leaves no namespace, process or file.
func TestNginxPHP(t *testing.T) {
	e := labtest.New(t, "t"+itoa(os.Getpid()%10000))
	ctx := context.Background()
	fpm := &lab.FPM{MaxChildren: 2}
	_, err := e.StartFPM(ctx, fpm)
	labtest.Must(t, err)
	ng, err := e.StartNginx(ctx, &lab.Nginx{PHP: fpm, KeepConn: true})
	labtest.Must(t, err)
	if got := get(t, e, "http://"+e.ServerIP+"/"); got != "200 OK hello from php\n" {
		t.Errorf("got %q", got)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !ng.Exited() {
		t.Error("nginx still running after Close")
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	if strings.Contains(string(out), e.ServerNS.Name) || strings.Contains(string(out), e.ClientNS.Name) {
		t.Errorf("namespaces left: %s", out)
	}
	if _, err := os.Stat(e.Dir); !os.IsNotExist(err) {
		t.Errorf("%s left: %v", e.Dir, err)
	}
}

// TestSetGlobalRestores: a global changed by the lab comes back on Close.
func TestSetGlobalRestores(t *testing.T) {
	e := labtest.New(t, "g"+itoa(os.Getpid()%10000))
	const p = "/proc/sys/net/netfilter/nf_conntrack_max"
	before, err := os.ReadFile(p)
	if err != nil {
		t.Skip(err)
	}
	if err := e.TrackConnections(e.ServerNS, 1234); err != nil {
		t.Fatal(err)
	}
	if now, _ := os.ReadFile(p); strings.TrimSpace(string(now)) != "1234" {
		t.Fatalf("nf_conntrack_max %s, want 1234", now)
	}
	e.Close()
	if after, _ := os.ReadFile(p); string(after) != string(before) {
		t.Errorf("nf_conntrack_max %s after Close, was %s", after, before)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
