package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/poll"
)

// What the tests wait for, asked of the kernel and the agent rather than
// guessed as a sleep.

// agentEvery is how often a test asks an agent again: well within the 20
// requests a second it answers.
const agentEvery = 250 * time.Millisecond

// connsAtLeast says why namespace ns does not hold n established TCP
// connections on local port port, or nil when it does.
func connsAtLeast(ns string, port, n int) error {
	out, err := exec.Command("ip", "netns", "exec", ns, "ss", "-Htn", "state", "established", fmt.Sprintf("( sport = :%d )", port)).Output()
	if err != nil {
		return fmt.Errorf("ss in %s: %v", ns, err)
	}
	got := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) != "" {
			got++
		}
	}
	if got < n {
		return fmt.Errorf("%d established connections on :%d in %s, want %d", got, port, ns, n)
	}
	return nil
}

// waitAgentSnapshots waits until the agent at url, in the lab's server
// namespace, holds at least n snapshots: a window of that many sampling
// intervals before whatever the test does next.
func waitAgentSnapshots(t *testing.T, e *lab.Env, url, tokFile string, n int) {
	t.Helper()
	tok, err := os.ReadFile(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DialContext: e.ClientNS.Dial}
	defer tr.CloseIdleConnections()
	client := &http.Client{Timeout: 10 * time.Second, Transport: tr}
	poll.UntilEvery(t, time.Minute, agentEvery, func() error {
		req, _ := http.NewRequest(http.MethodGet, url+agentapi.PathSnapshots, nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var w agentapi.Window
		if err := json.NewDecoder(resp.Body).Decode(&w); err != nil {
			return fmt.Errorf("%s: %s: %v", url, resp.Status, err)
		}
		if len(w.Snapshots) < n {
			return fmt.Errorf("the agent holds %d snapshots, want %d", len(w.Snapshots), n)
		}
		return nil
	})
}
