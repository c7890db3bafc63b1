package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAgentRefuses: the agent will not expose a host's evidence by
// accident: a non-loopback address needs a token, a token others can
// read is no token, and half a TLS configuration is an error. Each is a
// one-line error and exit 2, before anything listens.
func TestAgentRefuses(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.token")
	if err := os.WriteFile(open, []byte("0123456789abcdefghij\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	short := filepath.Join(dir, "short.token")
	if err := os.WriteFile(short, []byte("abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noUsers := filepath.Join(dir, "web-nousers.yml")
	if err := os.WriteFile(noUsers, []byte("http_server_config:\n  http2: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	openWeb := filepath.Join(dir, "web-open.yml")
	if err := os.WriteFile(openWeb, []byte("basic_auth_users:\n  prom: $2y$10$abcdefghijklmnopqrstuu\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	os.Chmod(openWeb, 0o666)
	// Client certificates verified without a CA of the configuration's
	// own: any public CA's would do.
	anyCA := filepath.Join(dir, "web-anyca.yml")
	if err := os.WriteFile(anyCA, []byte("tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  client_auth_type: RequireAndVerifyClientCert\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A configuration of ours in a directory others may write: once it
	// is gone, anyone may put theirs in its place.
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(shared, 0o777|os.ModeSticky)
	inShared := filepath.Join(shared, "web.yml")
	if err := os.WriteFile(inShared, []byte("basic_auth_users:\n  prom: $2y$10$abcdefghijklmnopqrstuu\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type refusal struct {
		args []string
		want string
	}
	var theirs []refusal
	if os.Geteuid() == 0 {
		// A symlink of another user's (a Secret volume's are root's).
		link := filepath.Join(dir, "link.token")
		if err := os.Symlink(short, link); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(link, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		theirs = append(theirs, refusal{[]string{"--token-file", link}, "goes through symlink " + link + " of uid 65534"})
	}
	for _, c := range append([]refusal{
		{[]string{"--listen", "0.0.0.0:9120"}, "refusing to serve on 0.0.0.0:9120 without --token-file"},
		{[]string{"--listen", ":9120"}, "refusing to serve on :9120 without --token-file"},
		{[]string{"--listen", "[::]:9120"}, "without --token-file"},
		{[]string{"--listen", "9120"}, "want HOST:PORT"},
		{[]string{"--token-file", open}, "can be read or written by others (mode 0644): chmod 600"},
		{[]string{"--token-file", short}, "at least 16 characters"},
		{[]string{"--token-file", filepath.Join(dir, "none")}, "token file " + filepath.Join(dir, "none") + " does not exist: make one first, readable by root only: install -d -m 0700 " + dir + " && (umask 077; head -c 24 /dev/urandom | base64 > " + filepath.Join(dir, "none") + ")"},
		{[]string{"--tls-cert", open}, "--tls-cert and --tls-key go together"},
		{[]string{"--retain", "1s"}, "--retain 1s"},
		{[]string{"--incidents", dir, "--incident-before", "20m"}, "must fit in --retain"},
		{[]string{"extra"}, "agent takes no arguments"},
		{[]string{"--metrics-listen", "0.0.0.0:9122"}, "refusing to serve /metrics on 0.0.0.0:9122 without --web.config.file"},
		{[]string{"--metrics-listen", ":9122", "--web.config.file", noUsers}, "asks for neither basic_auth_users nor client_auth_type"},
		{[]string{"--metrics-listen", "127.0.0.1:9122", "--web.config.file", openWeb}, "may be written by others"},
		{[]string{"--web.config.file", noUsers}, "--web.config.file goes with --metrics-listen"},
		{[]string{"--metrics-listen", "127.0.0.1:9122", "--web.config.file", anyCA}, "client_auth_type: RequireAndVerifyClientCert without client_ca_file would accept a certificate from any public CA"},
		{[]string{"--metrics-listen", "127.0.0.1:9122", "--web.config.file", inShared}, "which others may write"},
	}, theirs...) {
		var out bytes.Buffer
		code := Run(context.Background(), append([]string{"agent"}, c.args...), &out, &out)
		lines := strings.Count(strings.TrimSpace(out.String()), "\n") + 1
		if code != ExitUsage || !strings.Contains(out.String(), c.want) || lines != 1 {
			t.Errorf("agent %v: exit %d, %q; want exit 2 and one line with %q", c.args, code, out.String(), c.want)
		}
	}
}

// TestAgentClientBadInput: run and check name an agent by a URL, with
// the token file beside it.
func TestAgentClientBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--agent", "10.0.0.2:9120"}, "want http(s)://HOST:PORT"},
		{[]string{"check", "--agent", "http://10.0.0.2:9120/x"}, "want http(s)://HOST:PORT"},
		{[]string{"check", "--token-file", "/x"}, "--token-file, --token-env and --agent-ca go with --agent"},
		{[]string{"check", "--token-env", "TOKEN"}, "--token-file, --token-env and --agent-ca go with --agent"},
		{[]string{"run", "--server-agent", "http://10.0.0.2:9120", "--token-env", "ND_NO_SUCH_TOKEN_VAR", "http://10.0.0.2/"}, "--token-env ND_NO_SUCH_TOKEN_VAR: the variable is not set"},
		{[]string{"run", "--workers", "2", "http://10.0.0.2/"}, "a run's workers run as a Kubernetes Job"},
		{[]string{"run", "--workers", "2", "--kubernetes", "--kube-api", "ftp://x", "http://10.0.0.2/"}, "--kube-api \"ftp://x\""},
		{[]string{"check", "--agent", "http://127.0.0.1:1", "--window", "2s"}, "--window is the agent's to choose"},
		{[]string{"run", "--server-agent", "http://127.0.0.1:1", "--server-netns", "x", "http://127.0.0.1:1/"}, "pick one"},
		{[]string{"run", "--server-agent", "ftp://127.0.0.1:1", "http://127.0.0.1:1/"}, "want http(s)://HOST:PORT"},
	} {
		var out bytes.Buffer
		code := Run(context.Background(), c.args, &out, &out)
		if code != ExitUsage || !strings.Contains(out.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want exit 2 with %q", c.args, code, out.String(), c.want)
		}
	}
}

// TestRulesCommand: `netdoctor rules` writes what promtool and the
// operator read (internal/alerts tests the content), and refuses bad
// flags in one line.
func TestRulesCommand(t *testing.T) {
	var out bytes.Buffer
	if code := Run(context.Background(), []string{"rules", "--for", "10s"}, &out, &out); code != ExitOK {
		t.Fatalf("rules --for 10s: exit %d: %s", code, out.String())
	}
	if s := out.String(); !strings.Contains(s, "groups:") || !strings.Contains(s, "for: 10s") || strings.Contains(s, "for: 2m") {
		t.Errorf("rules --for 10s:\n%s", s)
	}
	out.Reset()
	if code := Run(context.Background(), []string{"rules", "--format", "prometheusrule", "--namespace", "monitoring"}, &out, &out); code != ExitOK ||
		!strings.Contains(out.String(), "kind: PrometheusRule") || !strings.Contains(out.String(), "namespace: monitoring") {
		t.Errorf("rules --format prometheusrule: exit %d:\n%s", code, out.String())
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"rules", "--format", "json"}, "want prometheus or prometheusrule"},
		{[]string{"rules", "--for", "10ms"}, "want at least 1s"},
		{[]string{"rules", "--runbook", "file:///etc/passwd"}, "want an http(s) URL"},
		{[]string{"rules", "--format", "prometheusrule", "--namespace", "Bad_NS"}, "Kubernetes namespace"},
		{[]string{"rules", "extra"}, "takes no arguments"},
	} {
		out.Reset()
		code := Run(context.Background(), c.args, &out, &out)
		if code != ExitUsage || !strings.Contains(out.String(), c.want) || strings.Count(strings.TrimSpace(out.String()), "\n") > 0 {
			t.Errorf("%v: exit %d, %q; want exit 2 and one line with %q", c.args, code, out.String(), c.want)
		}
	}
}
