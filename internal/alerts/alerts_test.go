package alerts

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestAlerts: one alert per finding the agent can make, none for those
// only a run makes; latent alerts exactly for IDs with a latent form;
// each runbook link lands on a section of docs/findings.md; critical
// findings are held for less time than warnings, latent ones longest.
func TestAlerts(t *testing.T) {
	doc, err := os.ReadFile("../../docs/findings.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (.+)$`).FindAllStringSubmatch(string(doc), -1) {
		anchors[HeadingAnchor(m[1])] = true
	}
	gs := Groups(Options{})
	byName := map[string]Rule{}
	for _, g := range gs {
		for _, r := range g.Rules {
			if _, dup := byName[r.Alert]; dup {
				t.Errorf("alert %s twice", r.Alert)
			}
			byName[r.Alert] = r
			_, frag, _ := strings.Cut(r.Annotations["runbook_url"], "#")
			if frag != "" && !anchors[frag] {
				t.Errorf("%s: runbook anchor #%s is no heading of docs/findings.md", r.Alert, frag)
			}
		}
	}
	for _, c := range rules.Classes() {
		id := c.ID
		a, hasActive := byName[AlertName(id, false)]
		l, hasLatent := byName[AlertName(id, true)]
		if hasActive != rules.Continuous(id) {
			t.Errorf("%s: alert %v, but the agent makes it: %v", id, hasActive, rules.Continuous(id))
		}
		if hasLatent != (c.Latent && rules.Continuous(id)) {
			t.Errorf("%s: latent alert %v, latent form %v", id, hasLatent, c.Latent)
		}
		if hasActive {
			d, _ := time.ParseDuration(a.For)
			noisy := c.Hold != 0
			if c.Critical && d > ForCritical && !noisy || d < ForCritical || noisy && d != c.Hold {
				t.Errorf("%s: for %s (critical %v, hold %v)", id, a.For, c.Critical, c.Hold)
			}
		}
		if hasLatent && (l.For != "1h" || l.Labels["status"] != "latent") {
			t.Errorf("%s latent: for %s, labels %v", id, l.For, l.Labels)
		}
	}
	for _, want := range []string{"NetdoctorAcceptQueueOverflow", "NetdoctorConntrackTableFull", "NetdoctorRiskySysctlLatent", "NetdoctorEvidencePartial"} {
		if _, ok := byName[want]; !ok {
			t.Errorf("no alert %s", want)
		}
	}
	for _, never := range []report.FindingID{rules.WorkerPoolExhausted, rules.UnexplainedDistress, rules.LoadGeneratorSaturated} {
		if _, ok := byName[AlertName(never, false)]; ok {
			t.Errorf("alert for %s, which only a run makes", never)
		}
	}
	if got := Groups(Options{For: 5 * time.Second}); got[0].Rules[0].For != "5s" || got[1].Rules[0].For != "5s" {
		t.Errorf("--for 5s: %s, %s", got[0].Rules[0].For, got[1].Rules[0].For)
	}
}

// TestPromtool: Prometheus's own tool accepts the rules, and its unit
// tests evaluate every alert: a finding held active (or latent) longer
// than the alert's duration fires with the finding's id, severity and
// target; one that flickers shorter does not; a latent series does not
// fire the active alert, nor an active one the latent.
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian: apt-get install prometheus; make test installs it)")
	}
	dir := t.TempDir()
	rulesFile := filepath.Join(dir, "netdoctor.rules.yml")
	var b bytes.Buffer
	if err := Write(&b, Options{}, false, ""); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rulesFile, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", rulesFile).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	tests := unitTests(Groups(Options{}))
	tb, err := yaml.Marshal(map[string]any{"rule_files": []string{"netdoctor.rules.yml"}, "evaluation_interval": "15s", "tests": tests})
	if err != nil {
		t.Fatal(err)
	}
	testFile := filepath.Join(dir, "netdoctor.test.yml")
	if err := os.WriteFile(testFile, tb, 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "test", "rules", testFile).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	if n := len(tests); n < 20 {
		t.Errorf("only %d promtool tests", n)
	}
	t.Logf("promtool test rules: %d tests pass", len(tests))
}

type series struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

type expAlert struct {
	Labels      map[string]string `yaml:"exp_labels"`
	Annotations map[string]string `yaml:"exp_annotations"`
}

type alertCase struct {
	EvalTime  string     `yaml:"eval_time"`
	Alertname string     `yaml:"alertname"`
	ExpAlerts []expAlert `yaml:"exp_alerts"`
}

type unitTest struct {
	Interval   string      `yaml:"interval"`
	Series     []series    `yaml:"input_series"`
	AlertCases []alertCase `yaml:"alert_rule_test"`
}

// unitTests are, for each alert, a firing and a quiet case.
func unitTests(gs []Group) []unitTest {
	const step = 15 * time.Second
	var out []unitTest
	for _, g := range gs {
		for _, r := range g.Rules {
			d, _ := time.ParseDuration(r.For)
			held := int((d + 2*time.Minute) / step)
			short := int(d/step) / 2
			var steady, other, flicker map[string]string
			var metric string
			switch g.Name {
			case "netdoctor-agent":
				metric = "netdoctor_agent_collector_ok"
				steady = map[string]string{"collector": "conntrack"}
				flicker = map[string]string{"collector": "sockets"}
				other = map[string]string{"collector": "interfaces"} // ok: 1
			default:
				id := strings.TrimSuffix(strings.TrimPrefix(r.Expr, `netdoctor_finding_`), " == 1")
				metric, id, _ = strings.Cut(id, `{id="`)
				metric = "netdoctor_finding_" + metric
				id = strings.TrimSuffix(id, `"}`)
				steady = map[string]string{"id": id, "severity": "critical", "target": "10.0.0.1:80"}
				flicker = map[string]string{"id": id, "severity": "warning", "target": "10.0.0.1:8080"}
				other = map[string]string{"id": "some-other-finding", "severity": "critical", "target": "x"}
			}
			base := map[string]string{"instance": "web1:9120", "job": "netdoctor"}
			sel := func(l map[string]string) string {
				var parts []string
				for _, k := range []string{"collector", "id", "instance", "job", "severity", "target"} {
					if v, ok := l[k]; ok {
						parts = append(parts, fmt.Sprintf("%s=%q", k, v))
					} else if v, ok := base[k]; ok {
						parts = append(parts, fmt.Sprintf("%s=%q", k, v))
					}
				}
				return metric + "{" + strings.Join(parts, ",") + "}"
			}
			firing, calm := "1", "1"
			if g.Name == "netdoctor-agent" {
				firing, calm = "0", "1"
			}
			in := []series{
				{sel(steady), fmt.Sprintf("%sx%d", firing, held)},
				{sel(flicker), fmt.Sprintf("%sx%d stale", firing, short)},
				{sel(other), fmt.Sprintf("%sx%d", calm, held)},
			}
			// The other form's series (latent for an active alert)
			// must not fire it.
			if g.Name != "netdoctor-agent" {
				twin := "netdoctor_finding_latent"
				if strings.HasPrefix(metric, twin) {
					twin = "netdoctor_finding_active"
				}
				l := map[string]string{"id": steady["id"], "severity": "warning", "target": "10.0.0.9:443"}
				in = append(in, series{strings.Replace(sel(l), metric, twin, 1), fmt.Sprintf("1x%d", held)})
			}
			labels := map[string]string{}
			for k, v := range base {
				labels[k] = v
			}
			for k, v := range steady {
				labels[k] = v
			}
			for k, v := range r.Labels {
				labels[k] = v
			}
			ann := map[string]string{}
			for k, v := range r.Annotations {
				for lk, lv := range labels {
					v = strings.ReplaceAll(v, "{{ $labels."+lk+" }}", lv)
				}
				ann[k] = v
			}
			evalAt := d + time.Minute
			out = append(out, unitTest{Interval: promDuration(step), Series: in, AlertCases: []alertCase{
				{EvalTime: promDuration(evalAt), Alertname: r.Alert, ExpAlerts: []expAlert{{Labels: labels, Annotations: ann}}},
				// Before its duration, nothing fires.
				{EvalTime: promDuration(max(d-step, step)), Alertname: r.Alert},
			}})
		}
	}
	return out
}
