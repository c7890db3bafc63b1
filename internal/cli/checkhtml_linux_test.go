package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// TestCheckHTML: check --html and diagnose --html of a namespace's
// bundle write the run's page without the load: it parses, shows the
// verdict, the findings and the host, and Chromium renders it with the
// findings on it.
func TestCheckHTML(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	dir := t.TempDir()
	diag := filepath.Join(dir, "diagnose.html")
	code, stdout, stderr := runCLI(t, "diagnose", "../../testdata/bundles/accept-overflow.json", "--html", diag)
	if code != ExitFindings || !strings.HasPrefix(stdout, "netdoctor diagnose") {
		t.Fatalf("diagnose --html: exit %d\n%s\n%s", code, stdout, stderr)
	}
	page := pageText(t, diag)
	for _, want := range []string{"UNHEALTHY: Accept queue overflow", "accept-queue-overflow", "fix: ", "Host", "listener 127.0.0.1:7100", "collectors"} {
		if !strings.Contains(page, want) {
			t.Errorf("diagnose page lacks %q", want)
		}
	}
	if strings.Contains(page, "Per second") || strings.Contains(page, "Load") {
		t.Errorf("diagnose page of a bundle without load shows load sections")
	}
	chk := filepath.Join(dir, "check.html")
	if code, stdout, stderr := runCLI(t, "check", "--window", "100ms", "--no-dns", "--html", chk); code != ExitOK && code != ExitFindings {
		t.Fatalf("check --html: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if page := pageText(t, chk); !strings.Contains(page, "netdoctor check") || !strings.Contains(page, "TCP sockets") {
		t.Errorf("check page lacks its title or host:\n%s", page)
	}
	code, stdout, _ = runCLI(t, "check", "--window", "100ms", "--no-dns", "--html", "-")
	if (code != ExitOK && code != ExitFindings) || !strings.HasPrefix(stdout, "<!doctype html>") {
		t.Errorf("check --html -: exit %d, stdout starts %q; want only the page", code, stdout[:min(40, len(stdout))])
	}

	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (scripts/deps.sh installs it): the pages were parsed but not rendered")
	}
	dom, err := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--window-size=412,900", "--dump-dom", "file://"+diag).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	if !strings.Contains(string(dom), "accept-queue-overflow") || !strings.Contains(string(dom), "UNHEALTHY") {
		t.Errorf("the rendered page does not show the finding")
	}
}

// pageText parses an HTML page and returns its text.
func pageText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var sb strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode && (n.Parent == nil || n.Parent.Data != "script" && n.Parent.Data != "style") {
			sb.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return sb.String()
}
