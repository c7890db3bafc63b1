package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/alerts"
	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/poll"
)

// TestPrometheusAlerts is the fleet as users run it: a real Prometheus
// (Debian's) in the lab's client namespace scrapes `netdoctor agent` in
// the server namespace over the veth, with the rules `netdoctor rules`
// prints, while ordinary clients (Go's net/http, not netdoctor's load)
// send traffic. A seed fault fires its alert, found through
// Prometheus's API; the healthy lab fires none, and holds no finding
// active. The rules' durations are shortened to 1 s (rules --for), one
// evaluation, so that the test does not wait minutes; promtool's tests
// in internal/alerts cover the real ones.
func TestPrometheusAlerts(t *testing.T) {
	labNeeds(t)
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("prometheus not installed (scripts/deps.sh installs Debian's)")
	}
	type alertCase struct {
		scenario string
		traffic  traffic
		want     string // the alert that must fire; "" for none
	}
	cases := []alertCase{
		// Seed 003: a listen backlog of 50 before 100 slow workers;
		// 400 clients connecting one request at a time overflow it.
		{"accept-queue-backlog", traffic{clients: 400, keepAlive: false, timeout: 3 * time.Second}, "NetdoctorAcceptQueueOverflow"},
		// Seed 002: a stateful firewall's table of 2000 entries; a new
		// connection per request fills it.
		{"conntrack-sawtooth", traffic{clients: 50, keepAlive: false, timeout: 2 * time.Second}, "NetdoctorConntrackTableFull"},
		// The control: keep-alive clients at a moderate rate.
		{"healthy", traffic{clients: 8, keepAlive: true, pause: 5 * time.Millisecond, timeout: 2 * time.Second}, ""},
	}
	check := func(t *testing.T, c alertCase) {
		sc, ok := lab.Lookup(c.scenario)
		if !ok {
			t.Fatalf("no scenario %s", c.scenario)
		}
		e := newLab(t)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		target, err := sc.Build(ctx, e, 1)
		labMust(t, err)
		agentURL, tok, _, err := e.StartAgent(ctx, "--recent", agentRecent.String())
		labMust(t, err)
		prom := startPrometheus(t, e, promBin, strings.TrimPrefix(agentURL, "http://"), tok)
		if err := prom.waitUp(60 * time.Second); err != nil {
			t.Fatal(err)
		}
		sent := c.traffic.run(ctx, t, e, target.URL)

		var firing []promAlert
		if c.want != "" {
			poll.WaitEvery(60*time.Second, time.Second, func() bool {
				firing = prom.alerts(t, "firing")
				return hasAlert(firing, c.want)
			})
		} else {
			// Nothing may fire, asserted once Prometheus has seen the
			// traffic: the agent's findings rest on its last --recent
			// window, so once a snapshot that ends such a window of
			// steady traffic (from its first 1000 answers on, past the
			// servers' start: php-fpm's children forking, the first
			// connections) has been scraped and the rules evaluated
			// after that scrape, any finding the traffic raised is
			// active there and its alert pending at least.
			poll.True(t, time.Minute, "1000 requests answered", func() bool { return sent.ok.Load() >= 1000 })
			prom.waitEvaluated(t, time.Now().Add(agentRecent+time.Second))
			firing = prom.alerts(t, "firing")
		}
		cancel()
		t.Logf("%s: %d requests answered, %d failed; firing: %s", c.scenario, sent.ok.Load(), sent.failed.Load(), alertNames(firing))
		if c.want == "" {
			if len(firing) > 0 {
				t.Errorf("healthy: alerts firing: %s", alertNames(firing))
			}
			if pending := prom.alerts(t, "pending"); len(pending) > 0 {
				t.Errorf("healthy: alerts pending: %s", alertNames(pending))
			}
			if r := prom.query(t, "netdoctor_finding_active"); len(r) > 0 {
				t.Errorf("healthy: findings active: %v", r)
			}
			if sent.ok.Load() < 1000 || sent.failed.Load() > 0 {
				t.Errorf("healthy: %d requests answered, %d failed: the control was not healthy", sent.ok.Load(), sent.failed.Load())
			}
			return
		}
		a := findAlert(firing, c.want)
		if a == nil {
			t.Fatalf("%s never fired in 60 s; firing: %s; findings: %v", c.want, alertNames(firing), prom.query(t, "netdoctor_finding_active"))
		}
		if a.Labels["severity"] != "critical" || a.Labels["id"] == "" || a.Labels["status"] != "active" || a.Annotations["runbook_url"] == "" {
			t.Errorf("%s: labels %v, annotations %v", c.want, a.Labels, a.Annotations)
		}
		// The series the alerts rest on are there too; the
		// listener's own drop counter rose with the overflow.
		if c.scenario == "accept-queue-backlog" && len(prom.query(t, "netdoctor_listener_drops_total > 0")) == 0 {
			t.Errorf("no listener's drops rose: %v", prom.query(t, "netdoctor_listener_drops_total"))
		}
		for _, q := range []string{"netdoctor_listener_accept_queue_limit", "netdoctor_conntrack_entries", "netdoctor_agent_collector_ok"} {
			if len(prom.query(t, q)) == 0 {
				t.Errorf("no %s scraped", q)
			}
		}
		// Every query of the Grafana dashboard is one Prometheus
		// accepts, and those of the scraped series have data.
		exprs := dashboardExprs(t)
		answered := 0
		for _, q := range exprs {
			if len(prom.query(t, q)) > 0 {
				answered++
			}
		}
		if answered < len(exprs)/2 {
			t.Errorf("only %d of the dashboard's %d queries have data", answered, len(exprs))
		}
	}
	// The two faults side by side: each is judged on its own alert,
	// from its own lab's agent, and neither reaches the other (the
	// accept-queue lab has no stateful firewall for the global
	// nf_conntrack_max of 2000 to bind). The healthy control after them,
	// alone: nothing may fire, and a neighbour's load would be its own.
	t.Run("faults", func(t *testing.T) {
		for _, c := range cases[:2] {
			t.Run(c.scenario, func(t *testing.T) {
				t.Parallel()
				check(t, c)
			})
		}
	})
	t.Run(cases[2].scenario, func(t *testing.T) { check(t, cases[2]) })
}

// agentRecent is the agent's --recent in TestPrometheusAlerts: the
// window its findings rest on.
const agentRecent = 5 * time.Second

// dashboardExprs are the PromQL queries of deploy/grafana/netdoctor.json
// with Grafana's variables given values: every instance, a 1m rate.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/grafana/netdoctor.json")
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func([]json.RawMessage)
	walk = func(ps []json.RawMessage) {
		for _, raw := range ps {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			for _, tg := range p.Targets {
				out = append(out, strings.NewReplacer("$instance", ".*", "$__rate_interval", "1m").Replace(tg.Expr))
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	if len(out) < 10 {
		t.Fatalf("the dashboard has %d queries", len(out))
	}
	return out
}

// traffic is ordinary clients: each sends GETs one after the other.
type traffic struct {
	clients   int
	keepAlive bool
	pause     time.Duration
	timeout   time.Duration
	// insecure takes the lab's self-signed certificates.
	insecure bool
}

type sent struct{ ok, failed atomic.Int64 }

// run starts the clients in the lab's client namespace; they stop when
// ctx ends (at most 90 s).
func (tr traffic) run(ctx context.Context, t *testing.T, e *lab.Env, target string) *sent {
	t.Helper()
	ns, err := netns.Resolve(e.ClientNS.Name)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: tr.timeout, Transport: &http.Transport{
		DialContext:         ns.Dial,
		DisableKeepAlives:   !tr.keepAlive,
		MaxIdleConnsPerHost: tr.clients,
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: tr.insecure},
	}}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	s := &sent{}
	var wg sync.WaitGroup
	for range tr.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				switch {
				case ctx.Err() != nil:
				case err != nil || resp.StatusCode >= 500:
					s.failed.Add(1)
				default:
					s.ok.Add(1)
				}
				if tr.pause > 0 {
					time.Sleep(tr.pause) // the traffic's pace
				}
			}
		}()
	}
	t.Cleanup(func() { cancel(); wg.Wait(); client.CloseIdleConnections() })
	return s
}

// prometheus is a Prometheus server in the lab's client namespace.
type prometheus struct {
	api  *http.Client
	base string
}

// startPrometheus runs Debian's prometheus in the client namespace with
// the agent as its one target, scraped every second with the agent's
// token, and netdoctor's rules (every duration 1 s) evaluated every
// second. Its data directory is the test's; the lab stops it.
func startPrometheus(t *testing.T, e *lab.Env, bin, agent, tokenFile string) *prometheus {
	t.Helper()
	dir := t.TempDir()
	var rules bytes.Buffer
	if err := alerts.Write(&rules, alerts.Options{For: time.Second}, false, ""); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: netdoctor
    authorization:
      type: Bearer
      credentials_file: %q
    static_configs:
      - targets: [%q]
`, filepath.Join(dir, "netdoctor.rules.yml"), tokenFile, agent)
	for name, body := range map[string][]byte{"netdoctor.rules.yml": rules.Bytes(), "prometheus.yml": []byte(config)} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const listen = "127.0.0.1:9090"
	_, err := e.Start(e.ClientNS, "prometheus", bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+listen, "--log.level=warn")
	labMust(t, err)
	ns, err := netns.Resolve(e.ClientNS.Name)
	if err != nil {
		t.Fatal(err)
	}
	return &prometheus{api: &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: ns.Dial}}, base: "http://" + listen}
}

// waitUp waits until Prometheus answers and has scraped the agent.
func (p *prometheus) waitUp(d time.Duration) error {
	var last string
	up := poll.WaitEvery(d, 250*time.Millisecond, func() bool {
		var r struct {
			Data struct {
				ActiveTargets []struct {
					Health    string `json:"health"`
					LastError string `json:"lastError"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if err := p.get("/api/v1/targets", &r); err != nil {
			last = err.Error()
		} else if len(r.Data.ActiveTargets) == 1 {
			if r.Data.ActiveTargets[0].Health == "up" {
				return true
			}
			last = "target " + r.Data.ActiveTargets[0].Health + ": " + r.Data.ActiveTargets[0].LastError
		}
		return false
	})
	if !up {
		return fmt.Errorf("prometheus has not scraped the agent in %v: %s", d, last)
	}
	return nil
}

// waitEvaluated waits until Prometheus holds an agent snapshot taken at
// or after from and has evaluated its rules since it scraped it.
func (p *prometheus) waitEvaluated(t *testing.T, from time.Time) {
	t.Helper()
	var scraped time.Time
	poll.UntilEvery(t, time.Minute, 250*time.Millisecond, func() error {
		if scraped.IsZero() {
			v, err := p.scalar("max(netdoctor_agent_last_snapshot_timestamp_seconds)")
			if err != nil {
				return err
			}
			if at := time.Unix(0, int64(v*1e9)); at.Before(from) {
				return fmt.Errorf("the last snapshot scraped is of %v, want one of %v or later", at.Format(time.StampMilli), from.Format(time.StampMilli))
			}
			scraped = time.Now()
		}
		var r struct {
			Data struct {
				Groups []struct {
					LastEvaluation time.Time `json:"lastEvaluation"`
				} `json:"groups"`
			} `json:"data"`
		}
		if err := p.get("/api/v1/rules", &r); err != nil {
			return err
		}
		if len(r.Data.Groups) == 0 {
			return errors.New("no rule group loaded")
		}
		for _, g := range r.Data.Groups {
			if !g.LastEvaluation.After(scraped) {
				return fmt.Errorf("rules last evaluated at %v, before the scrape seen at %v", g.LastEvaluation.Format(time.StampMilli), scraped.Format(time.StampMilli))
			}
		}
		return nil
	})
}

// scalar evaluates an instant PromQL query of one series and returns
// its value.
func (p *prometheus) scalar(q string) (float64, error) {
	var r struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/query?query="+url.QueryEscape(q), &r); err != nil {
		return 0, err
	}
	if len(r.Data.Result) != 1 {
		return 0, fmt.Errorf("%s: %d series", q, len(r.Data.Result))
	}
	v, _ := r.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(v, 64)
}

func (p *prometheus) get(path string, v any) error {
	resp, err := p.api.Get(p.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return fmt.Errorf("%s: %s: %s", path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

type promAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

// alerts are Prometheus's alerts in a state ("firing", "pending").
func (p *prometheus) alerts(t *testing.T, state string) []promAlert {
	t.Helper()
	var r struct {
		Data struct {
			Alerts []promAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/alerts", &r); err != nil {
		t.Fatal(err)
	}
	var out []promAlert
	for _, a := range r.Data.Alerts {
		if a.State == state {
			out = append(out, a)
		}
	}
	return out
}

// query evaluates an instant PromQL query and returns each series'
// labels; a query Prometheus rejects fails the test.
func (p *prometheus) query(t *testing.T, q string) []map[string]string {
	t.Helper()
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := p.get("/api/v1/query?query="+url.QueryEscape(q), &r); err != nil {
		t.Fatalf("query %s: %v", q, err)
	}
	var out []map[string]string
	for _, s := range r.Data.Result {
		out = append(out, s.Metric)
	}
	return out
}

func findAlert(as []promAlert, name string) *promAlert {
	for i, a := range as {
		if a.Labels["alertname"] == name {
			return &as[i]
		}
	}
	return nil
}

func hasAlert(as []promAlert, name string) bool { return findAlert(as, name) != nil }

func alertNames(as []promAlert) string {
	var out []string
	for _, a := range as {
		out = append(out, a.Labels["alertname"]+"{"+a.Labels["severity"]+" "+a.Labels["target"]+"}")
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
