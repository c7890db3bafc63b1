package cli

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/poll"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// testRunAgentKilled: the agent that gives a run its server side dies
// in the middle of the load. The run does not hang: it finishes its
// load, reports what it had, says the server's evidence is partial and
// since when, and exits ExitPartial.
func testRunAgentKilled(t *testing.T) {
	e := newLab(t)
	ctx := context.Background()
	_, err := e.StartNginx(ctx, &lab.Nginx{})
	labMust(t, err)
	url, tok, agent, err := e.StartAgent(ctx)
	labMust(t, err)
	killed := make(chan time.Time, 1)
	go func() {
		// Into the load: its ten connections are established (a run that
		// never gets there fails below).
		poll.Wait(time.Minute, func() bool { return connsAtLeast(e.ServerNS.Name, 80, 10) == nil })
		syscall.Kill(-agent.Cmd.Process.Pid, syscall.SIGKILL)
		killed <- time.Now()
	}()
	code, r, text := runIn(t, e.ClientNS.Name, "runremote", "-c 10 -t 1 -d 5s --baseline 1s --tail 1s --server-agent "+url+" --token-file "+tok+" http://"+e.ServerIP+"/")
	ended := time.Now()
	if code != ExitPartial {
		t.Errorf("exit %d, want %d (partial)\n%s", code, ExitPartial, text)
	}
	// At most the rest of the 5 s load and the 1 s tail, not a request to
	// the agent waiting for its answer (40 s): 30 s however busy the
	// machine.
	if took := ended.Sub(<-killed); took > 30*time.Second {
		t.Errorf("the run took %v to end after its agent died", took)
	}
	if !r.Partial || !strings.HasPrefix(r.Verdict, "PARTIAL") {
		t.Errorf("partial %v, verdict %q: the report must say its evidence is partial", r.Partial, r.Verdict)
	}
	var lost string
	for _, s := range r.Sides {
		if s.Name == "server" {
			lost = s.Lost
		}
	}
	if !strings.Contains(lost, "evidence ends at") || !strings.Contains(lost, "unreachable") {
		t.Errorf("server side lost %q: want when and why", lost)
	}
	if r.Load == nil || r.Load.Requests < 100 || r.Load.Status["2xx"] != r.Load.Requests {
		t.Errorf("the load must go on, unharmed, without the agent: %+v", r.Load)
	}
}

// TestAgentIncident: a fault appears while the agent runs and nothing of
// netdoctor loads the server: a client of its own overflows an accept
// queue. The agent's findings turn active, it writes an incident bundle,
// and `netdoctor diagnose` on that bundle names the fault. Two kinds of
// server: a listener that never accepts, and a real nginx whose worker
// hangs (stopped).
func TestAgentIncident(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	t.Run("never-accepts", func(t *testing.T) {
		e := newLab(t)
		mustExec(t, "ip", "netns", "exec", e.ServerNS.Name, "sysctl", "-qw", "net.core.somaxconn=8")
		url, tok, dir := incidentAgent(t, e)
		h := startHelper(t, e.ServerNS.Name, "noaccept") // 127.0.0.1:7100, backlog 128, capped to 8
		if _, err := h.stdin.Write([]byte("go\n")); err != nil {
			t.Fatal(err)
		}
		h.expect(t, "sent")
		wantIncident(t, e, url, tok, dir, "127.0.0.1:7100")
	})
	t.Run("nginx-stopped", func(t *testing.T) {
		e := newLab(t)
		ctx := context.Background()
		p, err := e.StartNginx(ctx, &lab.Nginx{Backlog: 8})
		labMust(t, err)
		url, tok, dir := incidentAgent(t, e)
		// The worker hangs: the queue fills and overflows as clients
		// keep connecting.
		// Once forked: the master listens before it starts its worker.
		var workers []int
		poll.True(t, time.Minute, "an nginx worker under the master", func() bool {
			workers = app.Children(p.Cmd.Process.Pid)
			return len(workers) > 0
		})
		for _, w := range workers {
			syscall.Kill(w, syscall.SIGSTOP)
		}
		defer func() {
			for _, w := range workers {
				syscall.Kill(w, syscall.SIGCONT)
			}
		}()
		client, err := netns.Resolve(e.ClientNS.Name)
		if err != nil {
			t.Fatal(err)
		}
		// Clients keep connecting until the incident is written: each
		// holds what it got, the rest time out and try again.
		cctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for cctx.Err() == nil {
					dctx, cancel := context.WithTimeout(cctx, time.Second)
					c, err := client.Dial(dctx, "tcp", e.ServerIP+":80")
					cancel()
					if err == nil {
						<-cctx.Done()
						c.Close()
					}
				}
			}()
		}
		wantIncident(t, e, url, tok, dir, e.ServerIP+":80")
		stop()
		wg.Wait()
	})
}

// incidentAgent starts an agent in the lab's server namespace with a
// short window and incident times, writing incidents to a new directory.
func incidentAgent(t *testing.T, e *lab.Env) (url, tok, dir string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "incidents")
	url, tok, _, err := e.StartAgent(context.Background(), "--interval", "250ms", "--recent", "2s", "--retain", "1m",
		"--incidents", dir, "--incident-before", "10s", "--incident-after", "2s")
	labMust(t, err)
	waitAgentSnapshots(t, e, url, tok, 4) // a quiet second before the fault
	return url, tok, dir
}

// wantIncident waits for the agent to hold accept-queue-overflow on the
// listener active (check --agent, from the client namespace) and to
// write its incident, and diagnoses the incident.
func wantIncident(t *testing.T, e *lab.Env, url, tok, dir, listener string) {
	t.Helper()
	if !poll.WaitEvery(time.Minute, agentEvery, func() bool {
		cmd := exec.Command("ip", "netns", "exec", e.ClientNS.Name, os.Args[0], "check", "--agent", url, "--token-file", tok, "--json", "-")
		cmd.Env = append(os.Environ(), "ND_HELPER=cli")
		out, err := cmd.Output()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		var r report.Report
		if err := json.Unmarshal(out, &r); err != nil {
			t.Fatalf("check --agent: %v\n%s", err, out)
		}
		for _, f := range r.Findings {
			if f.ID == rules.AcceptQueueOverflow && f.Status == report.Active && strings.Contains(f.Subject, listener) {
				return true
			}
		}
		return false
	}) {
		t.Fatalf("the agent never held accept-queue-overflow on %s active", listener)
	}
	var files []string
	if !poll.Wait(time.Minute, func() bool {
		files, _ = filepath.Glob(filepath.Join(dir, "incident-*.bundle.json.gz"))
		return len(files) > 0
	}) {
		b, _ := os.ReadFile(filepath.Join(e.Dir, "agent.out"))
		t.Fatalf("no incident written in %s; agent log:\n%s", dir, b)
	}
	var out bytes.Buffer
	code := Run(context.Background(), []string{"diagnose", files[0]}, &out, &out)
	text := out.String()
	if code != ExitFindings || !strings.Contains(text, "Incident at") || !strings.Contains(text, "accept-queue-overflow "+listener+" turned active") ||
		!strings.Contains(text, "(accept-queue-overflow)") || !strings.Contains(text, "CRITICAL active") {
		t.Errorf("diagnose %s: exit %d\n%s", files[0], code, text)
	}
}

// syncBuffer is a bytes.Buffer for a writer on another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAgentTLS: with a certificate the agent serves HTTPS only; check
// --agent reaches it when told the CA, and refuses a certificate it
// cannot verify. The agent stops cleanly when asked to.
func TestAgentTLS(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	tok := filepath.Join(dir, "token")
	if err := os.WriteFile(tok, []byte("tls-test-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"agent", "--listen", "127.0.0.1:0", "--token-file", tok, "--tls-cert", cert, "--tls-key", key, "--dns-every", "0", "--interval", "200ms"}, &logs, &logs)
	}()
	var url string
	poll.Wait(time.Minute, func() bool {
		if _, rest, ok := strings.Cut(logs.String(), "url=https://"); ok {
			url = "https://" + strings.Fields(rest)[0]
		}
		return url != ""
	})
	if url == "" {
		cancel()
		t.Fatalf("the agent did not say where it serves:\n%s", logs.String())
	}
	// A diagnosis needs two snapshots: asked again until the agent has
	// taken them.
	var out bytes.Buffer
	poll.UntilEvery(t, time.Minute, agentEvery, func() error {
		out.Reset()
		code := Run(ctx, []string{"check", "--agent", url, "--token-file", tok, "--agent-ca", cert, "--json", "-"}, &out, &out)
		var r report.Report
		if (code != ExitOK && code != ExitFindings) || json.Unmarshal(out.Bytes(), &r) != nil || !strings.HasPrefix(r.Command, "check --agent https://") || r.Window.Snapshots < 2 {
			return fmt.Errorf("check --agent over TLS: exit %d\n%.600s", code, out.String())
		}
		return nil
	})
	// An unknown CA: the handshake fails at once, unless a busy machine
	// held the agent past the client's 5 s, which is asked again.
	var code int
	poll.Wait(time.Minute, func() bool {
		out.Reset()
		code = Run(ctx, []string{"check", "--agent", url, "--token-file", tok}, &out, &out)
		return !strings.Contains(out.String(), "deadline exceeded")
	})
	if code != ExitFailed || !strings.Contains(out.String(), "certificate") {
		t.Errorf("an unknown CA: exit %d %q; want exit 4 naming the certificate", code, out.String())
	}
	out.Reset()
	plain := strings.Replace(url, "https://", "http://", 1)
	if code := Run(ctx, []string{"check", "--agent", plain, "--token-file", tok}, &out, &out); code == ExitOK || code == ExitFindings {
		t.Errorf("plain HTTP to the TLS agent: exit %d %q", code, out.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("the agent exited %d on cancel:\n%s", code, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the agent did not stop within 10 s of its context's end")
	}
}

// selfSigned writes a CA-signed-by-itself certificate for 127.0.0.1 and
// its key.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "netdoctor test agent"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestAgentMetricsAccess: what /metrics shows, and to whom, as
// docs/agent.md says: on the API's listener only with the token, like
// the API; on --metrics-listen, whatever its exporter-toolkit web
// configuration admits (here TLS and basic auth), and nothing of the API.
func TestAgentMetricsAccess(t *testing.T) {
	dir := t.TempDir()
	cert, key := selfSigned(t, dir)
	tok := filepath.Join(dir, "token")
	const token = "metrics-test-token-0123456789"
	if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte("scrape-secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	webCfg := filepath.Join(dir, "web.yml")
	cfg := fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  prometheus: %s\n", cert, key, hash)
	if err := os.WriteFile(webCfg, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- Run(ctx, []string{"agent", "--listen", "127.0.0.1:0", "--token-file", tok, "--metrics-listen", "127.0.0.1:0",
			"--web.config.file", webCfg, "--dns-every", "0", "--interval", "200ms"}, &logs, &logs)
	}()
	var api, metrics string
	if !poll.Wait(time.Minute, func() bool {
		if _, rest, ok := strings.Cut(logs.String(), "url=http://"); ok {
			api = "http://" + strings.Fields(rest)[0]
		}
		if _, rest, ok := strings.Cut(logs.String(), `"metrics serving" addr=`); ok {
			metrics = "https://" + strings.Fields(rest)[0]
		}
		return api != "" && metrics != ""
	}) {
		t.Fatalf("the agent did not say where it serves:\n%s", logs.String())
	}
	pool := x509.NewCertPool()
	certPEM, _ := os.ReadFile(cert)
	pool.AppendCertsFromPEM(certPEM)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(url string, auth func(*http.Request)) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if auth != nil {
			auth(req)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	bearer := func(tok string) func(*http.Request) {
		return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	}
	basic := func(user, pass string) func(*http.Request) {
		return func(r *http.Request) { r.SetBasicAuth(user, pass) }
	}
	// The series the agent serves once it has sampled: its own, and
	// those naming the host's listeners and their processes.
	// Asked every 100 ms: the agent answers 20 requests a second.
	var body string
	poll.WaitEvery(time.Minute, 100*time.Millisecond, func() bool {
		code, b := get(api+"/metrics", bearer(token))
		if code == http.StatusOK && strings.Contains(b, "netdoctor_listener_") {
			body = b
		}
		return body != ""
	})
	if body == "" || !strings.Contains(body, "netdoctor_agent_snapshots_total") {
		t.Fatalf("/metrics with the token has no listener series:\n%.1000s", body)
	}
	for _, c := range []struct {
		what string
		url  string
		auth func(*http.Request)
		code int
	}{
		{"API listener, no token", api + "/metrics", nil, http.StatusUnauthorized},
		{"API listener, wrong token", api + "/metrics", bearer("wrong"), http.StatusUnauthorized},
		{"API listener, basic auth", api + "/metrics", basic("prometheus", "scrape-secret"), http.StatusUnauthorized},
		{"API listener, /healthz", api + "/healthz", nil, http.StatusOK},
		{"metrics listener, no credentials", metrics + "/metrics", nil, http.StatusUnauthorized},
		{"metrics listener, wrong password", metrics + "/metrics", basic("prometheus", "guess"), http.StatusUnauthorized},
		{"metrics listener, the API's token", metrics + "/metrics", bearer(token), http.StatusUnauthorized},
		{"metrics listener, credentials", metrics + "/metrics", basic("prometheus", "scrape-secret"), http.StatusOK},
		{"metrics listener, the API", metrics + agentapi.PathHost, basic("prometheus", "scrape-secret"), http.StatusNotFound},
		{"metrics listener, the API with the token", metrics + agentapi.PathSnapshot, bearer(token), http.StatusUnauthorized},
	} {
		code, b := get(c.url, c.auth)
		if code != c.code {
			t.Errorf("%s: %d, want %d\n%.300s", c.what, code, c.code, b)
		}
		if code != http.StatusOK && strings.Contains(b, "netdoctor_") {
			t.Errorf("%s: refused, but the body has series:\n%.300s", c.what, b)
		}
		if c.code == http.StatusOK && strings.HasSuffix(c.url, "/metrics") && !strings.Contains(b, "netdoctor_listener_") {
			t.Errorf("%s: no listener series:\n%.300s", c.what, b)
		}
	}
	if code, _ := get(strings.Replace(metrics, "https://", "http://", 1)+"/metrics", basic("prometheus", "scrape-secret")); code == http.StatusOK {
		t.Error("the metrics listener answered plain HTTP")
	}
	cancel()
	select {
	case code := <-done:
		if code != ExitOK {
			t.Errorf("the agent exited %d on cancel:\n%s", code, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not stop")
	}
}
