package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/poll"
	"github.com/netdoctor/netdoctor/internal/symtab/symtabtest"
)

// craftedName is the file name of the crafted program of
// TestOtherUsersCraftedListener (fakeMain runs as it).
const craftedName = "nd-crafted"

// hostileComm is the command name the crafted program gives itself:
// it would set root's terminal title and hide what follows.
const hostileComm = "\x1b]0;PWNED\x07\x1b[8m"

// peakBound is what run and the agent may reach at their peak, whatever
// another user's binary claims: the agent's MemoryMax in its unit.
const peakBound = 256 << 20

// TestOtherUsersCraftedListener: issue 39 (items 1 and 2). nobody runs a
// copy of a Go program whose section names' table claims to inflate to
// 2 GiB (the kernel runs it as before), named with escape sequences,
// listening. check and run print no ESC or BEL byte and the name still
// shows; run and the agent read its build information within their
// budget (peak memory under the agent's MemoryMax) and say the binary
// was skipped.
func TestOtherUsersCraftedListener(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	ns := testNetns(t)
	dir := nobodysDir(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	crafted, err := symtabtest.CompressedNames(b, 2<<30)
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, craftedName)
	writeExe(t, exe, crafted)
	asNobody(t, exe)
	const port = 8091
	cmd := exec.Command(exe)
	cmd.Env = []string{"ND_COMM=" + hostileComm, fmt.Sprintf("ND_ADDR=127.0.0.1:%d", port), "PATH=/usr/bin:/bin"}
	startAsNobody(t, ns, cmd, port, true)
	if c, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", cmd.Process.Pid)); !strings.Contains(string(c), "PWNED") {
		t.Fatalf("the program's name is %q", c)
	}

	clean := func(what, out string) {
		t.Helper()
		if i := strings.IndexAny(out, "\x1b\x07"); i >= 0 {
			t.Errorf("%s: an ESC or BEL byte at %d: %q", what, i, out[max(0, i-60):min(len(out), i+60)])
		}
		if !strings.Contains(out, "PWNED") {
			t.Errorf("%s: the program's name is not shown:\n%s", what, out)
		}
	}
	code, stdout, stderr := ndIn(t, ns, time.Minute, "check", "--window", "1s", "--no-dns")
	if code != ExitOK && code != ExitFindings {
		t.Errorf("check: exit %d\n%s", code, stderr)
	}
	clean("check", stdout+stderr)

	code, stdout, stderr, peak := ndPeak(t, ns, time.Minute, "run", "-c", "2", "-t", "1", "-d", "1s", "--baseline", "1s", "--tail", "1s",
		fmt.Sprintf("http://127.0.0.1:%d/", port))
	if code != ExitOK && code != ExitFindings {
		t.Errorf("run: exit %d\n%s", code, stderr)
	}
	clean("run", stdout+stderr)
	if !strings.Contains(stdout, "budget, skipped") {
		t.Errorf("run does not say the binary was skipped:\n%s", stdout)
	}
	if peak > peakBound {
		t.Errorf("run's peak memory %d MiB, over %d MiB", peak>>20, peakBound>>20)
	}
	t.Logf("run's peak memory: %d MiB", peak>>20)

	// The agent follows every listener: its servers API says the binary
	// was skipped, its peak memory stays under its unit's limit.
	tok := filepath.Join(t.TempDir(), "token")
	const token = "crafted-test-token-0123456789ab"
	if err := os.WriteFile(tok, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	agent := exec.CommandContext(ctx, "ip", "netns", "exec", ns, os.Args[0], "agent", "--listen", "127.0.0.1:9121", "--token-file", tok,
		"--interval", "200ms", "--dns-every", "0", "--dependency-every", "3s")
	agent.Env = append(os.Environ(), "ND_HELPER=cli")
	var logs syncBuffer
	agent.Stdout, agent.Stderr = &logs, &logs
	if err := agent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cancel()
		agent.Wait()
		if i := strings.IndexAny(logs.String(), "\x1b\x07"); i >= 0 {
			t.Errorf("the agent's log holds an ESC or BEL byte: %q", logs.String())
		}
	}()
	n, _ := netns.Resolve(ns)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: n.Dial}}
	var body string
	if !poll.Wait(30*time.Second, func() bool {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("http://127.0.0.1:9121%s?port=%d", agentapi.PathServers, port), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		bb, _ := io.ReadAll(resp.Body)
		body = string(bb)
		return resp.StatusCode == http.StatusOK && strings.Contains(body, "budget, skipped")
	}) {
		t.Errorf("the agent does not say the binary was skipped after 30 s:\n%s\n%s", body, logs.String())
	}
	if hwm := vmHWM(t, agent.Process.Pid); hwm > peakBound {
		t.Errorf("the agent's peak memory %d MiB, over %d MiB", hwm>>20, peakBound>>20)
	} else {
		t.Logf("the agent's peak memory: %d MiB", hwm>>20)
	}
}

// ndPeak is ndIn, with the peak resident memory of netdoctor (ip netns
// exec execs it, so the child is netdoctor) and of what it waited for.
func ndPeak(t *testing.T, ns string, limit time.Duration, args ...string) (int, string, string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, os.Args[0]}, args...)...)
	// The child's own peak, from its VmHWM as it ends: not wait4's
	// ru_maxrss, which holds the peak of the memory the child was
	// started from (Go starts children with CLONE_VM, and exec records
	// the old memory's peak): this test process's, with the tests
	// running beside this one (363 MiB).
	peakFile := filepath.Join(t.TempDir(), "peak")
	cmd.Env = append(os.Environ(), "ND_HELPER=cli", "ND_PEAK_FILE="+peakFile)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("netdoctor %s did not end within %v\n%s", strings.Join(args, " "), limit, stderr.String())
	}
	if cmd.ProcessState == nil {
		t.Fatalf("netdoctor %s did not start", strings.Join(args, " "))
	}
	b, err := os.ReadFile(peakFile)
	if err != nil {
		t.Fatalf("netdoctor %s did not write its peak memory: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	peak, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String(), peak
}

// writePeak writes this process's peak resident memory (VmHWM, bytes)
// to path, for ndPeak.
func writePeak(path string) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			if kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
				os.WriteFile(path, []byte(strconv.FormatInt(kb<<10, 10)), 0o600)
			}
		}
	}
}

// vmHWM is a process's peak resident memory, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
