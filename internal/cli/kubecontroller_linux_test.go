package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/yaml"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/lab/labtest"
	"github.com/netdoctor/netdoctor/internal/netns"
)

// fakeAPI serves the calls of the Kubernetes API a capacity controller
// makes (this machine has no cluster): a Job it creates is decoded
// strictly with the API's own types, as the API server would, and runs
// as its pods would, its workers' command (this binary as netdoctor)
// as processes in the lab's client namespace with their completion
// index, their output kept as the pods' logs. Everything else is real:
// the controller, its workers, the server.
type fakeAPI struct {
	t  *testing.T
	ns string // the network namespace the workers run in

	mu      sync.Mutex
	jobs    map[string]*fakeJob
	created []string
	deleted []string
}

type fakeJob struct {
	n                 int
	active, succeeded int
	failed            int
	logs              [][]byte
	cancel            context.CancelFunc
	done              sync.WaitGroup
}

// serve listens on the loopback of the client namespace, where the
// controller runs, and serves until the test ends.
func (f *fakeAPI) serve(t *testing.T) string {
	ns, err := netns.Resolve(f.ns)
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	if err := ns.Do(func() (err error) { ln, err = net.Listen("tcp", "127.0.0.1:0"); return err }); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: f, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() {
		srv.Close()
		f.mu.Lock()
		jobs := f.jobs
		f.mu.Unlock()
		for _, j := range jobs {
			j.cancel()
			j.done.Wait()
		}
	})
	return "http://" + ln.Addr().String()
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPost && len(p) == 6 && p[0] == "apis" && p[5] == "jobs":
		f.create(w, r)
	case len(p) == 7 && p[0] == "apis" && p[5] == "jobs":
		f.mu.Lock()
		j := f.jobs[p[6]]
		if r.Method == http.MethodDelete && j != nil {
			f.deleted = append(f.deleted, p[6])
			j.cancel()
		}
		f.mu.Unlock()
		switch {
		case j == nil:
			http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
		case r.Method == http.MethodDelete:
			fmt.Fprint(w, `{"status":"Success"}`)
		default:
			f.status(w, j)
		}
	case r.Method == http.MethodGet && len(p) == 5 && p[0] == "api" && p[4] == "pods":
		name, _ := strings.CutPrefix(r.URL.Query().Get("labelSelector"), "netdoctor.io/job=")
		f.mu.Lock()
		j := f.jobs[name]
		f.mu.Unlock()
		type item struct {
			Metadata struct {
				Name        string            `json:"name"`
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		var list struct {
			Items []item `json:"items"`
		}
		for i := 0; j != nil && i < j.n; i++ {
			var it item
			it.Metadata.Name = fmt.Sprintf("%s-%d-abcde", name, i)
			it.Metadata.Annotations = map[string]string{"batch.kubernetes.io/job-completion-index": strconv.Itoa(i)}
			list.Items = append(list.Items, it)
		}
		json.NewEncoder(w).Encode(list)
	case r.Method == http.MethodGet && len(p) == 7 && p[0] == "api" && p[6] == "log":
		name, idx, ok := cutIndex(p[5])
		f.mu.Lock()
		j := f.jobs[name]
		var log []byte
		if ok && j != nil && idx < len(j.logs) {
			log = j.logs[idx]
		}
		f.mu.Unlock()
		if j == nil {
			http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
			return
		}
		w.Write(log)
	default:
		http.Error(w, `{"message":"not served by the test"}`, http.StatusNotImplemented)
	}
}

// cutIndex splits a fake pod's name NAME-INDEX-abcde.
func cutIndex(pod string) (string, int, bool) {
	rest, ok := strings.CutSuffix(pod, "-abcde")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '-')
	n, err := strconv.Atoi(rest[i+1:])
	return rest[:i], n, err == nil
}

func (f *fakeAPI) create(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var job batchv1.Job
	if r.Header.Get("Content-Type") != "application/yaml" {
		http.Error(w, `{"message":"want application/yaml"}`, http.StatusUnsupportedMediaType)
		return
	}
	if err := yaml.UnmarshalStrict(b, &job); err != nil {
		f.t.Errorf("the controller's Job is not a batch/v1 Job: %v\n%s", err, b)
		http.Error(w, `{"message":"invalid"}`, http.StatusUnprocessableEntity)
		return
	}
	n := int(*job.Spec.Completions)
	c := job.Spec.Template.Spec.Containers[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*job.Spec.ActiveDeadlineSeconds)*time.Second)
	j := &fakeJob{n: n, active: n, logs: make([][]byte, n), cancel: cancel}
	f.mu.Lock()
	if f.jobs == nil {
		f.jobs = map[string]*fakeJob{}
	}
	f.jobs[job.Name] = j
	f.created = append(f.created, job.Name)
	f.mu.Unlock()
	for i := range n {
		// The kubelet expands $(VAR) in a container's arguments from
		// its environment: the completion index here.
		args := []string{"netns", "exec", f.ns, os.Args[0]}
		for _, a := range c.Args {
			args = append(args, strings.ReplaceAll(a, "$(JOB_COMPLETION_INDEX)", strconv.Itoa(i)))
		}
		cmd := exec.CommandContext(ctx, "ip", args...)
		cmd.Env = append(os.Environ(), "ND_HELPER=cli")
		j.done.Add(1)
		go func() {
			defer j.done.Done()
			out, err := cmd.CombinedOutput()
			f.mu.Lock()
			defer f.mu.Unlock()
			j.logs[i] = out
			j.active--
			if err != nil {
				j.failed++
			} else {
				j.succeeded++
			}
		}()
	}
	w.WriteHeader(http.StatusCreated)
	w.Write([]byte(`{"kind":"Job"}`))
}

func (f *fakeAPI) status(w http.ResponseWriter, j *fakeJob) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var conds []map[string]string
	switch {
	case j.failed > 0 && j.active == 0:
		conds = append(conds, map[string]string{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "message": "Job has reached the specified backoff limit"})
	case j.succeeded == j.n:
		conds = append(conds, map[string]string{"type": "Complete", "status": "True"})
	}
	json.NewEncoder(w).Encode(map[string]any{"status": map[string]any{"active": j.active, "succeeded": j.succeeded, "failed": j.failed, "conditions": conds}})
}

// poolCluster is python-pool's lab with the test's API server in its
// client namespace, where the controller and its workers run.
func poolCluster(t *testing.T) (e *lab.Env, sc *lab.Scenario, target *lab.Target, api *fakeAPI, url string) {
	sc, _ = lab.Lookup("python-pool")
	e = newLab(t)
	target, err := sc.Build(context.Background(), e, 1)
	labtest.Must(t, err)
	api = &fakeAPI{t: t, ns: e.ClientNS.Name}
	return e, sc, target, api, api.serve(t)
}

// testCapacityKubernetes: capacity --workers 2 --kubernetes --kube-api
// runs the search as a cluster's controller would, each step an Indexed
// Job of two worker pods created through the API, followed to its end,
// its pods' logs merged, deleted. On the python-pool scenario, within a
// short --max-duration (the knee's precision is testCapacityWorkers'
// to hold, with the same merged steps): a capacity below the pool's 80
// requests a second, above the first steps', a Job a step, each
// deleted. Measured with --max-duration 60s: 82.3 req/s in 9 steps, as
// testCapacityWorkers finds it.
func testCapacityKubernetes(t *testing.T) {
	e, _, target, api, url := poolCluster(t)
	c, out, _ := capacityIn(t, e.ClientNS.Name, "--workers", "2", "--kubernetes", "--kube-api", url, "--namespace", "perf", "--start-margin", "1s",
		"--no-diagnosis", "--slo", "p99<=250ms", "--max-duration", "25s", target.URL)
	if c.CapacityRPS < 40 || c.CapacityRPS > 1.1*80 || len(c.Steps) < 3 {
		t.Errorf("capacity %.1f req/s in %d steps: want at least 3 steps, the pool's 80 req/s or below", c.CapacityRPS, len(c.Steps))
	}
	if !strings.Contains(out, "Indexed Job of 2 worker pods in namespace perf") {
		t.Errorf("the text does not say the steps were Jobs:\n%s", out)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	t.Logf("measured: %d steps, %d Jobs created, %d deleted; capacity %.1f req/s", len(c.Steps), len(api.created), len(api.deleted), c.CapacityRPS)
	if len(api.created) != len(c.Steps) || len(api.deleted) != len(api.created) {
		t.Errorf("%d steps, %d Jobs created, %d deleted: want a Job a step, each deleted", len(c.Steps), len(api.created), len(api.deleted))
	}
}

// testRunKubernetes: run --workers 2 --kubernetes --kube-api sends its
// load as an Indexed Job of two worker pods (the API's calls served by
// the test, as for testCapacityKubernetes) while it samples the server
// itself: the findings come with the distributed load. On python-pool
// (4 threads for 50 connections, 50 ms each) the merged load names both
// workers and the full thread pool is found, as one process's run finds
// it (TestLab).
func testRunKubernetes(t *testing.T) {
	e, sc, target, api, url := poolCluster(t)
	path := t.TempDir() + "/run.json"
	code, out := netdoctorIn(t, e.ClientNS.Name, "run", "--workers", "2", "--kubernetes", "--kube-api", url, "--start-margin", "3s",
		"--server-netns", e.ServerNS.Name, "-c", "50", "-t", "1", "-d", "4s", "--tail", "1s", "--json", path, target.URL)
	if code > 1 {
		t.Fatalf("run: exit %d\n%s", code, out)
	}
	var r runJSON
	readJSON(t, path, &r)
	if r.Load == nil || len(r.Load.Workers) != 2 || r.Load.Requests < 100 {
		t.Fatalf("the load: %+v\n%s", r.Load, out)
	}
	t.Logf("measured: %d requests from %d workers, %.0f req/s; findings %v", r.Load.Requests, len(r.Load.Workers), r.Load.RPS, activeIDs(&r))
	wantActive(t, &r, out, "", sc.Reports...)
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.created) != 1 || len(api.deleted) != 1 {
		t.Errorf("%d Jobs created, %d deleted: want one, deleted", len(api.created), len(api.deleted))
	}
}
