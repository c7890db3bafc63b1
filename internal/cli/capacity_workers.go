package cli

import (
	"bytes"
	"context"
	"encoding/json"
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
	name := fmt.Sprintf("%s-%d", w.name, w.steps)
	share, err := load.Segment{Index: 1, Count: w.n}.Share(o)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	start := now.Add(w.lead)
	args := append([]string{"load"}, loadArgs(o)...)
	if o.Measure > 0 {
		args = append(args, "--debug-measure-from", o.Measure.String())
	}
	job, err := kubejob.New(kubejob.Spec{Name: name, Image: w.image, Workers: w.n, Args: args, Target: o.URL,
		StartAt: start, Run: o.Duration + o.Timeout, Threads: share.Threads, Connections: share.Connections}, now)
	if err != nil {
		return nil, err
	}
	if err := w.api.CreateJob(ctx, job); err != nil {
		return nil, err
	}
	defer func() {
		// Gone whatever happened, the search cancelled included.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = w.api.DeleteJob(ctx, name)
	}()
	// The workers end by themselves (-d, their requests' timeout); the
	// Job's own deadline bounds pods that never start.
	wait, cancel := context.WithDeadline(ctx, start.Add(o.Duration+o.Timeout+time.Minute))
	defer cancel()
	st, err := w.api.WaitJob(wait, name, w.every)
	if err != nil {
		return nil, err
	}
	logs, err := w.api.Logs(ctx, name)
	if err != nil {
		return nil, err
	}
	rs, err := workerResults(name, w.n, logs)
	if err != nil {
		if st.Failure != "" {
			err = fmt.Errorf("%w (the Job: %s)", err, st.Failure)
		}
		return nil, err
	}
	return load.Merge(rs)
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

// capacityController prints the controller that runs the search on a
// cluster: its service account's RBAC and a Job of one pod running this
// same command (args) with --kube-api in-cluster, whose steps are then
// Jobs of the workers. What names a file of this host has no place in
// the pod.
func capacityController(w io.Writer, args []string, set map[string]bool, c kubejob.ControllerSpec) error {
	for _, f := range []string{"html", "verify-with", "server-netns", "s", "script", "token-file", "agent-ca"} {
		if set[f] {
			return badInput("--kubernetes: --%s names a file or namespace of this host, not of the controller's pod", f)
		}
	}
	if j := flagValue(args, "json"); j != "" && j != "-" {
		return badInput("--kubernetes: the controller's report goes to its log (--json -), not to %s", j)
	}
	c.Args = append([]string{"capacity", "--kube-api", kubejob.InCluster}, args...)
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
	_, err = fmt.Fprintf(w, `# netdoctor capacity on the cluster: a controller pod (the Job %[1]s) runs the search and sends each
# step as an Indexed Job of worker pods (%[1]s-step-N), judged on their merged results; its service
# account may create, follow and delete Jobs and read their pods' logs in its namespace, nothing else.
#   kubectl apply%[2]s -f controller.yaml
#   kubectl logs%[2]s -f job/%[1]s
---
%[3]s---
%[4]s`, c.Name, nsArg, rbac, y)
	return err
}

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
