package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/capacity"
	"github.com/netdoctor/netdoctor/internal/kubejob"
	"github.com/netdoctor/netdoctor/internal/load"
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

// capacityKubernetes prints how capacity --workers n would run on a
// cluster: a controller pod running the search, each step an Indexed
// Job. It runs nothing: docs/distributed.md says what is left.
func capacityKubernetes(w io.Writer, n int, ns string, o capacity.Options) error {
	seg := load.Segment{Index: 1, Count: n}
	step := o.Load
	step.Rate, step.Duration, step.Measure = 1000, 5*time.Second, 1250*time.Millisecond
	args := workerArgs(step, seg, time.Unix(0, 0))
	for i, a := range args {
		switch {
		case i > 0 && args[i-1] == "--start-at":
			args[i] = "$START_AT"
		case i > 0 && args[i-1] == "--segment":
			args[i] = fmt.Sprintf("$(JOB_COMPLETION_INDEX)/%d --segment-base 0", n)
		case strings.ContainsAny(a, " '\"$"):
			args[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	_, err := fmt.Fprintf(w, `# capacity --workers %d --kubernetes is not run from here yet (docs/distributed.md, "capacity across workers").
# On a cluster a controller pod runs the search (netdoctor capacity --workers %d ...) and, for each step,
# creates an Indexed Job of %d pods whose worker i runs, e.g. for a step of 1000 req/s:
#   netdoctor load %s
# waits for it to complete, reads the pods' logs (the workers' results), merges them (load.Merge) and
# judges the step on the merged result; the next step's Job is created only then (lockstep).
# The controller needs RBAC to create, watch and delete Jobs and to read pods and their logs in its
# namespace: this ServiceAccount, Role and RoleBinding (kubectl apply -f -).
---
`, n, n, n, strings.Join(args, " "))
	if err != nil {
		return err
	}
	y, err := kubejob.ControllerRBAC("netdoctor-capacity", ns)
	if err != nil {
		return err
	}
	_, err = w.Write(y)
	return err
}
