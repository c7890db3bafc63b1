package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/capacity"
	"github.com/netdoctor/netdoctor/internal/kubejob"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/printable"
)

// workerSelf is the program capacity --workers starts as its workers,
// with the environment it needs: this one (a test's binary sets its
// own role). /proc/self/exe is the image this process runs, whatever happens to
// the path it was started from: a file replaced there since is never run
// as root.
var workerSelf = func() (string, []string) { return "/proc/self/exe", nil }

// capacityWorkers is the Loader of capacity --workers n on this host:
// each step is n processes of `netdoctor load --segment i/n --start-at
// T --json -`, merged.
func capacityWorkers(n int) capacity.Workers {
	return capacity.Workers{N: n, Command: func(o load.Options, seg load.Segment, start time.Time) *exec.Cmd {
		return workerCommand(context.Background(), o, seg, start)
	}}
}

// workerCommand is worker seg's command line for the step o: the
// whole step's flags, which the worker shares itself.
func workerCommand(ctx context.Context, o load.Options, seg load.Segment, start time.Time) *exec.Cmd {
	exe, env := workerSelf()
	args := append([]string{"load"}, workerArgs(o, seg, start)...)
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// workerArgs are a step's worker's arguments after "load".
func workerArgs(o load.Options, seg load.Segment, start time.Time) []string {
	a := loadArgs(o)
	a = append(a, "--segment", seg.String(), "--start-at", start.UTC().Format(time.RFC3339Nano), "--json", "-")
	if o.Measure > 0 {
		a = append(a, "--debug-measure-from", o.Measure.String())
	}
	return append(a, o.URL)
}

// clusterFlags are capacity's and run's flags for their workers on a
// Kubernetes cluster (--workers N --kubernetes): the controller printed,
// or run here against --kube-api.
type clusterFlags struct {
	workers    int
	kubernetes bool
	api, ns    string
	image      string
	name       string
	lead       time.Duration
}

func registerCluster(fs *flag.FlagSet, cmd, workers string) *clusterFlags {
	c := &clusterFlags{}
	fs.IntVar(&c.workers, "workers", 0, workers)
	fs.BoolVar(&c.kubernetes, "kubernetes", false, "with --workers: send the load as Kubernetes Indexed Jobs of --workers pods (with --kube-api); without --kube-api, print the controller's Job that runs this "+cmd+" on the cluster and its RBAC (kubectl apply -f -); docs/distributed.md")
	fs.StringVar(&c.ns, "namespace", "", "with --kubernetes: the Jobs' namespace (default: the controller pod's; printed, kubectl's)")
	fs.StringVar(&c.api, "kube-api", "", "with --kubernetes: run here, the workers' Jobs created through this API server: in-cluster (a pod's service account) or a URL (kubectl proxy's http://127.0.0.1:8001)")
	fs.StringVar(&c.image, "image", kubejob.Image, "with --kubernetes: the workers' and the controller's image (the agent's)")
	fs.StringVar(&c.name, "job-name", "netdoctor-"+cmd, "with --kubernetes: the controller's Job and service account; the workers' Jobs are NAME-step-N")
	fs.Var(durationFlag{&c.lead}, "start-margin", "with --kube-api: how long after the workers' Job is created they start together: the pods' scheduling and the image's pull (default 15s)")
	return c
}

// client is the API the workers' Jobs are created through; nil when the
// controller is to be printed (no --kube-api).
func (c *clusterFlags) client() (*clusterWorkers, error) {
	if c.api == "" {
		return nil, nil
	}
	if !c.kubernetes {
		return nil, badInput("--kube-api needs --workers N --kubernetes")
	}
	if c.lead == 0 {
		c.lead = 15 * time.Second
	}
	if c.lead < time.Second || c.lead > load.MaxStartAhead {
		return nil, badInput("--start-margin %v: want 1s to %v", c.lead, load.MaxStartAhead)
	}
	api, err := kubejob.NewClient(c.api, c.ns)
	if err != nil {
		return nil, badInput("%v", err)
	}
	return &clusterWorkers{api: api, n: c.workers, name: c.name + "-step", image: c.image, lead: c.lead, every: time.Second}, nil
}

// clusterWorkers is capacity's Loader on a Kubernetes cluster, the
// search's controller: each step an Indexed Job of n worker pods, each
// `netdoctor load --segment i/n --start-at T --json -` with the step's
// whole flags (the worker takes its share), created through the API,
// followed to its end, its pods' logs (their results) merged, and
// deleted. The steps advance in lockstep: the next Job is created once
// this one's result is judged.
type clusterWorkers struct {
	api   *kubejob.Client
	n     int
	name  string // the Jobs' names: name-1, name-2… a step each
	image string
	// lead is how long after its Job is created a step's workers start:
	// the pods' scheduling and the image's pull (on a node that has
	// it, a few seconds).
	lead time.Duration
	// every is how often the Job's state is read.
	every time.Duration
	steps int
}

// Load runs step o as a Job and merges its workers' results.
func (w *clusterWorkers) Load(ctx context.Context, o load.Options) (*load.Result, error) {
	w.steps++
	j, err := w.launch(ctx, fmt.Sprintf("%s-%d", w.name, w.steps), o, time.Now().Add(w.lead))
	if err != nil {
		return nil, err
	}
	defer j.delete(ctx)
	return j.collect(ctx)
}

// clusterLoad is one load's Job, launched.
type clusterLoad struct {
	w     *clusterWorkers
	name  string
	start time.Time
	run   time.Duration
}

// launch creates the Job of the load o whose workers start together at
// start.
func (w *clusterWorkers) launch(ctx context.Context, name string, o load.Options, start time.Time) (*clusterLoad, error) {
	share, err := load.Segment{Index: 1, Count: w.n}.Share(o)
	if err != nil {
		return nil, err
	}
	args := append([]string{"load"}, loadArgs(o)...)
	if o.Measure > 0 {
		args = append(args, "--debug-measure-from", o.Measure.String())
	}
	run := o.Duration + o.Timeout
	job, err := kubejob.New(kubejob.Spec{Name: name, Image: w.image, Workers: w.n, Args: args, Target: o.URL,
		StartAt: start, Run: run, Threads: share.Threads, Connections: share.Connections}, time.Now())
	if err != nil {
		return nil, err
	}
	if err := w.api.CreateJob(ctx, job); err != nil {
		return nil, err
	}
	return &clusterLoad{w: w, name: name, start: start, run: run}, nil
}

// collect waits for the Job's workers to end and merges their results.
func (j *clusterLoad) collect(ctx context.Context) (*load.Result, error) {
	// The workers end by themselves (-d, their requests' timeout); the
	// Job's own deadline bounds pods that never start.
	wait, cancel := context.WithDeadline(ctx, j.start.Add(j.run+time.Minute))
	defer cancel()
	st, err := j.w.api.WaitJob(wait, j.name, j.w.every)
	if err != nil {
		return nil, err
	}
	logs, err := j.w.api.Logs(ctx, j.name)
	if err != nil {
		return nil, err
	}
	rs, err := workerResults(j.name, j.w.n, logs)
	if err != nil {
		if st.Failure != "" {
			err = fmt.Errorf("%w (the Job: %s)", err, st.Failure)
		}
		return nil, err
	}
	return load.Merge(rs)
}

// delete removes the Job and its pods, whatever happened: the caller's
// context ended too.
func (j *clusterLoad) delete(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = j.w.api.DeleteJob(ctx, j.name)
}

// workerResults reads each of a step's n workers' result from its pod's
// log, by completion index: a worker whose pod logged no result (its
// one-line error, or nothing) fails the step, named.
func workerResults(job string, n int, logs []kubejob.PodLog) ([]*load.Result, error) {
	rs := make([]*load.Result, n)
	for _, l := range logs {
		if l.Index < 0 || l.Index >= n {
			continue
		}
		var r load.Result
		if err := json.Unmarshal(bytes.TrimSpace(l.Log), &r); err != nil {
			line := lastLine(string(l.Log))
			return nil, fmt.Errorf("job %s: worker %d (pod %s) logged no result: %q", job, l.Index, l.Pod, printable.String(line[:min(len(line), 200)]))
		}
		if rs[l.Index] == nil || r.Requests > rs[l.Index].Requests {
			rs[l.Index] = &r // a pod retried: its last attempt's
		}
	}
	for i, r := range rs {
		if r == nil {
			return nil, fmt.Errorf("job %s: worker %d of %d has no pod with a log", job, i, n)
		}
	}
	return rs, nil
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// printController prints the controller that runs cmd (capacity, run)
// on a cluster: its service account's RBAC and a Job of one pod running
// this same command (args) with --kube-api in-cluster, whose workers are
// then Jobs of their own. What names a file or namespace of this host
// has no place in the pod; the agent's token, for --server-agent, comes
// from the agent's Secret through --token-env.
func printController(w io.Writer, cmd string, args []string, set map[string]bool, c kubejob.ControllerSpec) error {
	if err := hostOnly(set); err != nil {
		return err
	}
	if j := flagValue(args, "json"); j != "" && j != "-" {
		return badInput("--kubernetes: the controller's report goes to its log (--json -), not to %s", j)
	}
	c.Args = append([]string{cmd, "--kube-api", kubejob.InCluster}, args...)
	if set["server-agent"] {
		c.TokenEnv = flagValue(args, "token-env")
		if c.TokenEnv == "" {
			c.TokenEnv = "NETDOCTOR_TOKEN"
			c.Args = append([]string{cmd, "--kube-api", kubejob.InCluster, "--token-env", c.TokenEnv}, args...)
		}
	}
	job, err := kubejob.Controller(c)
	if err != nil {
		return badInput("--kubernetes: %v", err)
	}
	y, err := job.YAML()
	if err != nil {
		return err
	}
	rbac, err := kubejob.ControllerRBAC(c.Name, c.Namespace)
	if err != nil {
		return err
	}
	nsArg := ""
	if c.Namespace != "" {
		nsArg = " -n " + c.Namespace
	}
	token := ""
	if c.TokenEnv != "" {
		token = fmt.Sprintf("# The agent's token is read from the Secret %s (key token) in the controller's namespace:\n#   kubectl get secret%s %s -o yaml  # the agent's (deploy/kubernetes), copied here if it lives elsewhere\n", kubejob.TokenSecret, nsArg, kubejob.TokenSecret)
	}
	_, err = fmt.Fprintf(w, `# netdoctor %[1]s on the cluster: a controller pod (the Job %[2]s) runs it and sends the load as
# Indexed Jobs of worker pods (%[2]s-step-N), judged on their merged results; its service account may
# create, follow and delete Jobs and read their pods' logs in its namespace, nothing else.
%[5]s#   kubectl apply%[3]s -f controller.yaml
#   kubectl logs%[3]s -f job/%[2]s
---
%[4]s---
%[6]s`, cmd, c.Name, nsArg, rbac, token, y)
	return err
}

// hostOnly refuses, for a controller printed to run in a pod, the flags
// that name a file or namespace of this host. It is checked before the
// flags are read: a token file is not to be opened for a pod.
func hostOnly(set map[string]bool) error {
	for _, f := range []string{"html", "bundle", "verify-with", "server-netns", "s", "script", "token-file", "agent-ca", "body-file"} {
		if set[f] {
			hint := ""
			if f == "token-file" {
				hint = " (in the pod the token is the Secret " + kubejob.TokenSecret + "'s: leave --token-file out, or name the variable with --token-env)"
			}
			return badInput("--kubernetes: --%s names a file or namespace of this host, not of the controller's pod%s", f, hint)
		}
	}
	return nil
}

// printing reports whether the command prints its controller rather
// than running: --kubernetes without --kube-api.
func (c *clusterFlags) printing() bool { return c.kubernetes && c.api == "" }

// flagValue is the value given to --name (or -name) in args, "" when
// it is not there.
func flagValue(args []string, name string) string {
	for i, a := range args {
		a = strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
