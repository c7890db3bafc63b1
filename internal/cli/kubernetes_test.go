package cli

import (
	"flag"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/netdoctor/netdoctor/internal/load"
)

// TestKubernetesJob: load --workers N --kubernetes prints an Indexed Job
// that the API's own types decode strictly (no unknown or misspelt
// field), of N pods of the agent's image that run no privilege, with
// requests, limits and a deadline, each running a load command whose
// share (from the 0-based completion index) and start parse back, and
// whose shares sum to the load asked for.
func TestKubernetesJob(t *testing.T) {
	before := time.Now()
	code, stdout, stderr := runCLI(t, "load", "--workers", "3", "--kubernetes", "--namespace", "perf", "--start-margin", "90s",
		"-c", "301", "-t", "2", "-d", "30s", "-R", "1000.5", "-H", "X-Test: 1", "http://svc.perf:8080/")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, manifest, ok := strings.Cut(stdout, "\n---\n")
	if !ok {
		t.Fatalf("no manifest after the comments:\n%s", stdout)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(manifest), &job); err != nil {
		t.Fatalf("not a batch/v1 Job: %v\n%s", err, manifest)
	}
	s := job.Spec
	if job.APIVersion != "batch/v1" || job.Kind != "Job" || job.Namespace != "perf" || job.Name != "netdoctor-load" ||
		s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion || s.Completions == nil || *s.Completions != 3 ||
		s.Parallelism == nil || *s.Parallelism != 3 || s.BackoffLimit == nil || *s.BackoffLimit != 0 {
		t.Errorf("job %s/%s %s %s: mode %v, completions %v, parallelism %v, backoff %v", job.Namespace, job.Name, job.APIVersion, job.Kind,
			s.CompletionMode, s.Completions, s.Parallelism, s.BackoffLimit)
	}
	// The deadline covers the margin, the run, a timeout and some slack.
	if d := s.ActiveDeadlineSeconds; d == nil || *d < 90+30 || *d > 90+30+2+180 {
		t.Errorf("activeDeadlineSeconds %v, want about 90 s of margin + 30 s of load + slack", d)
	}
	pod := s.Template.Spec
	if pod.RestartPolicy != corev1.RestartPolicyNever || len(pod.Containers) != 1 {
		t.Fatalf("pod: restart %q, %d containers", pod.RestartPolicy, len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Image != daemonSetImage(t) {
		t.Errorf("image %q, want the agent's %q", c.Image, daemonSetImage(t))
	}
	// No privilege: non-root, no escalation, no capability, read-only.
	sc, psc := c.SecurityContext, pod.SecurityContext
	if sc == nil || psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Privileged == nil || *sc.Privileged ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.Capabilities == nil ||
		len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || len(sc.Capabilities.Add) != 0 {
		t.Errorf("security contexts: pod %+v, container %+v", psc, sc)
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, lim := c.Resources.Requests[name], c.Resources.Limits[name]
		if req.IsZero() || req.Cmp(lim) != 0 {
			t.Errorf("%s: request %v, limit %v; want both, equal", name, req.String(), lim.String())
		}
	}
	if cpu := c.Resources.Requests[corev1.ResourceCPU]; cpu.Cmp(resource.MustParse("3")) != 0 {
		t.Errorf("cpu %v, want a core per thread and one for the runtime", cpu.String())
	}
	if len(c.Env) != 1 || c.Env[0].Name != "JOB_COMPLETION_INDEX" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.FieldRef == nil ||
		c.Env[0].ValueFrom.FieldRef.FieldPath != "metadata.annotations['batch.kubernetes.io/job-completion-index']" {
		t.Errorf("env %+v: want JOB_COMPLETION_INDEX from the pod's completion index", c.Env)
	}
	if len(c.Command) != 1 || c.Command[0] != "/usr/local/bin/netdoctor" || len(c.Args) == 0 || c.Args[0] != "load" {
		t.Fatalf("command %q, args %q", c.Command, c.Args)
	}

	// Each pod's command, as the kubelet expands it, is a worker's load.
	var conns int
	var milli int64
	var starts []time.Time
	for i := 0; i < 3; i++ {
		var args []string
		for _, a := range c.Args[1:] {
			args = append(args, strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(i)))
		}
		o, err := parseWorker(args)
		if err != nil {
			t.Fatalf("pod %d's load %q: %v", i, args, err)
		}
		if o.Segment == nil || *o.Segment != (load.Segment{Index: i + 1, Count: 3}) || o.URL != "http://svc.perf:8080/" || o.Duration != 30*time.Second {
			t.Errorf("pod %d: segment %v, URL %s, duration %v", i, o.Segment, o.URL, o.Duration)
		}
		conns += o.Connections
		milli += int64(o.Rate*1000 + 0.5)
		starts = append(starts, o.StartAt)
	}
	if conns != 301 || milli != 1000500 {
		t.Errorf("the pods' shares sum to %d connections, %d m req/s; want 301, 1000500", conns, milli)
	}
	if !starts[0].Equal(starts[2]) || starts[0].Before(before.Add(89*time.Second)) || starts[0].After(time.Now().Add(91*time.Second)) {
		t.Errorf("start times %v, want one, 90 s after printing", starts)
	}

	for _, args := range [][]string{
		{"load", "--workers", "3", "http://svc/"},
		{"load", "--workers", "0", "--kubernetes", "http://svc/"},
		{"load", "--workers", "4", "--kubernetes", "-c", "3", "http://svc/"},
		{"load", "--workers", "2", "--kubernetes", "--segment", "1/2", "http://svc/"},
		{"load", "--workers", "2", "--kubernetes", "--job-name", "Bad_Name", "http://svc/"},
		{"load", "--workers", "2", "--kubernetes", "--start-margin", "2h", "http://svc/"},
	} {
		if code, stdout, stderr := runCLI(t, args...); code != ExitUsage || stdout != "" || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want one line and exit 2", args[1:], code, stdout, stderr)
		}
	}
}

// parseWorker parses a worker's load flags as runLoad does, up to the
// load.
func parseWorker(args []string) (load.Options, error) {
	fs := newFlags("load", io.Discard)
	lo := loadFlags(fs)
	layerFlags(fs)
	wk := workerFlags(fs, true)
	kubeFlags(fs)
	pos, err := parse(fs, splitShort(args, wrkShort), io.Discard)
	if err != nil {
		return load.Options{}, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	lo.o.URL = pos[0]
	if err := lo.check(set); err != nil {
		return load.Options{}, err
	}
	err = wk.apply(&lo.o, time.Now())
	return lo.o, err
}

// daemonSetImage is the agent's image in deploy/kubernetes.
func daemonSetImage(t *testing.T) string {
	b, err := os.ReadFile("../../deploy/kubernetes/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s+image:\s*(\S+)`).FindSubmatch(b)
	if m == nil {
		t.Fatal("no image in the DaemonSet")
	}
	return string(m[1])
}

// TestKubernetesCapacityRBAC: capacity --workers N --kubernetes prints
// a ServiceAccount, a Role, a RoleBinding and the controller's Job that
// the API's own types decode strictly: the Role is namespaced and grants
// only the Jobs' lifecycle and reading their pods' logs (no secrets, no
// pods created, no wildcard), bound to that account, which the
// controller's one unprivileged pod runs as, running the same search
// with --kube-api in-cluster.
func TestKubernetesCapacityRBAC(t *testing.T) {
	code, stdout, stderr := runCLI(t, "capacity", "--workers", "3", "--kubernetes", "--namespace", "perf", "-c", "30", "http://svc.perf:8080/")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, manifests, ok := strings.Cut(stdout, "\n---\n")
	if !ok {
		t.Fatalf("no manifests after the comments:\n%s", stdout)
	}
	docs := strings.Split(manifests, "---\n")
	if len(docs) != 4 {
		t.Fatalf("%d documents, want a ServiceAccount, a Role, a RoleBinding and the controller's Job:\n%s", len(docs), manifests)
	}
	var sa corev1.ServiceAccount
	var role rbacv1.Role
	var rb rbacv1.RoleBinding
	var job batchv1.Job
	for i, into := range []any{&sa, &role, &rb, &job} {
		if err := yaml.UnmarshalStrict([]byte(docs[i]), into); err != nil {
			t.Fatalf("document %d: %v\n%s", i+1, err, docs[i])
		}
	}
	if sa.Kind != "ServiceAccount" || sa.APIVersion != "v1" || sa.Namespace != "perf" || sa.Name == "" {
		t.Errorf("service account %s %s %s/%s", sa.APIVersion, sa.Kind, sa.Namespace, sa.Name)
	}
	if role.Kind != "Role" || role.APIVersion != "rbac.authorization.k8s.io/v1" || role.Namespace != "perf" {
		t.Errorf("role %s %s in %q: want a namespaced rbac/v1 Role", role.APIVersion, role.Kind, role.Namespace)
	}
	allowed := map[string]bool{"batch/jobs/create": true, "batch/jobs/get": true, "batch/jobs/list": true, "batch/jobs/watch": true, "batch/jobs/delete": true,
		"/pods/get": true, "/pods/list": true, "/pods/watch": true, "/pods/log/get": true}
	got := map[string]bool{}
	for _, r := range role.Rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v: unexpected names or URLs", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					k := g + "/" + res + "/" + v
					if !allowed[k] {
						t.Errorf("the role grants %s: more than the controller needs", k)
					}
					got[k] = true
				}
			}
		}
	}
	if len(got) != len(allowed) {
		t.Errorf("the role grants %v, want %v", got, allowed)
	}
	if rb.Kind != "RoleBinding" || rb.Namespace != "perf" || rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != role.Name ||
		rb.RoleRef.APIGroup != "rbac.authorization.k8s.io" || len(rb.Subjects) != 1 || rb.Subjects[0].Kind != "ServiceAccount" ||
		rb.Subjects[0].Name != sa.Name || rb.Subjects[0].Namespace != "perf" {
		t.Errorf("binding %+v: want the role bound to the service account", rb)
	}
	// The controller: one pod running this same search with the
	// service account's token as its only credential, no privilege.
	pod := job.Spec.Template.Spec
	if job.Kind != "Job" || job.Namespace != "perf" || pod.ServiceAccountName != sa.Name || pod.AutomountServiceAccountToken == nil || !*pod.AutomountServiceAccountToken ||
		job.Spec.Completions == nil || *job.Spec.Completions != 1 || job.Spec.ActiveDeadlineSeconds == nil || len(pod.Containers) != 1 {
		t.Fatalf("controller %s %s/%s: service account %q, completions %v, deadline %v", job.Kind, job.Namespace, job.Name, pod.ServiceAccountName, job.Spec.Completions, job.Spec.ActiveDeadlineSeconds)
	}
	c := pod.Containers[0]
	if got, want := strings.Join(c.Args, " "), "capacity --kube-api in-cluster --workers 3 --kubernetes --namespace perf -c 30 http://svc.perf:8080/"; got != want {
		t.Errorf("controller args %q, want %q", got, want)
	}
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || c.SecurityContext == nil ||
		c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged || c.Resources.Limits.Cpu().IsZero() {
		t.Errorf("controller pod: security %+v, container %+v, limits %v: want non-root, unprivileged, limited", pod.SecurityContext, c.SecurityContext, c.Resources.Limits)
	}
	// What names this host's files is refused, not carried into the pod.
	for _, bad := range [][]string{{"--html", "c.html"}, {"--json", "c.json"}, {"--verify-with", "plan.json"}} {
		args := append([]string{"capacity", "--workers", "2", "--kubernetes"}, bad...)
		if code, _, stderr := runCLI(t, append(args, "http://svc/")...); code != ExitUsage {
			t.Errorf("%v: exit %d %s, want a usage error", bad, code, stderr)
		}
	}
}

// TestKubernetesRunController: run --workers N --kubernetes prints the
// controller of a distributed run: the RBAC and a Job whose one pod runs
// the same run with --kube-api in-cluster, the agent's token read from
// the agent's Secret through --token-env (a non-root pod reads a
// Secret's file only through its group, which --token-file refuses); a
// token file of this host is refused.
func TestKubernetesRunController(t *testing.T) {
	code, stdout, stderr := runCLI(t, "run", "--workers", "4", "--kubernetes", "--namespace", "perf", "--server-agent", "http://10.0.0.5:9120",
		"-c", "40", "-d", "30s", "http://svc.perf:8080/")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	_, manifests, _ := strings.Cut(stdout, "\n---\n")
	docs := strings.Split(manifests, "---\n")
	if len(docs) != 4 {
		t.Fatalf("%d documents, want the RBAC's three and the controller's Job:\n%s", len(docs), manifests)
	}
	var job batchv1.Job
	if err := yaml.UnmarshalStrict([]byte(docs[3]), &job); err != nil {
		t.Fatalf("not a batch/v1 Job: %v\n%s", err, docs[3])
	}
	c := job.Spec.Template.Spec.Containers[0]
	if got, want := strings.Join(c.Args, " "), "run --kube-api in-cluster --token-env NETDOCTOR_TOKEN --workers 4 --kubernetes --namespace perf --server-agent http://10.0.0.5:9120 -c 40 -d 30s http://svc.perf:8080/"; got != want {
		t.Errorf("args %q, want %q", got, want)
	}
	if len(c.Env) != 1 || c.Env[0].Name != "NETDOCTOR_TOKEN" || c.Env[0].ValueFrom == nil || c.Env[0].ValueFrom.SecretKeyRef == nil ||
		c.Env[0].ValueFrom.SecretKeyRef.Name != "netdoctor-token" || c.Env[0].ValueFrom.SecretKeyRef.Key != "token" {
		t.Errorf("env %+v: want NETDOCTOR_TOKEN from the Secret netdoctor-token's key token", c.Env)
	}
	if d := job.Spec.ActiveDeadlineSeconds; d == nil || *d < 30 {
		t.Errorf("deadline %v: want the run's length at least", d)
	}
	if code, _, stderr := runCLI(t, "run", "--workers", "4", "--kubernetes", "--server-agent", "http://10.0.0.5:9120", "--token-file", "/etc/netdoctor/token", "http://svc/"); code != ExitUsage || !strings.Contains(stderr, "--token-env") {
		t.Errorf("--token-file: exit %d %q, want a usage error naming --token-env", code, stderr)
	}
}
