package kubejob

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/printable"
)

// Client is what a controller needs of a Kubernetes API server to run
// its workers' Jobs: create one, follow it to its end, read its pods'
// logs, delete it. It speaks the API's REST paths over HTTP rather than
// through client-go, for the reason the manifests are local types (a
// controller's five calls against a client that would more than double
// the binary); the Job is sent as the YAML `kubectl apply` takes.
type Client struct {
	base  *url.URL
	ns    string
	token string
	http  *http.Client
}

// InCluster names the API server a pod reaches with its service
// account (the controller's Job runs with one): `--kube-api in-cluster`.
const InCluster = "in-cluster"

// saDir is where Kubernetes mounts a pod's service account: its token,
// the cluster's CA and the pod's namespace.
const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// Bounds of what the API server's answers may make the controller hold:
// an object or a list of its Job's pods, and one worker's log (its
// result: histograms of a few hundred buckets and a timeline).
const (
	maxObject = 4 << 20
	MaxLog    = 64 << 20
)

// NewClient is a client of the API server at api: InCluster (the pod's
// service account, over HTTPS checked against the cluster's CA), or a
// URL such as `kubectl proxy`'s http://127.0.0.1:8001, which
// authenticates the calls itself. ns is the namespace of the Jobs: the
// pod's own when empty in a cluster, else "default".
func NewClient(api, ns string) (*Client, error) {
	c := &Client{ns: ns, http: &http.Client{Timeout: 30 * time.Second}}
	if api != InCluster {
		u, err := url.Parse(api)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("--kube-api %q: want %s or the API server's URL (http://127.0.0.1:8001 for kubectl proxy)", api, InCluster)
		}
		c.base = u
		if c.ns == "" {
			c.ns = "default"
		}
		return c, nil
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return nil, errors.New("--kube-api in-cluster: not in a pod (KUBERNETES_SERVICE_HOST and _PORT are unset); run the controller's Job, or pass the API server's URL")
	}
	tok, err := readSA("token")
	if err != nil {
		return nil, err
	}
	ca, err := readSA("ca.crt")
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no certificate", filepath.Join(saDir, "ca.crt"))
	}
	if c.ns == "" {
		b, err := readSA("namespace")
		if err != nil {
			return nil, err
		}
		c.ns = strings.TrimSpace(string(b))
	}
	c.base = &url.URL{Scheme: "https", Host: net.JoinHostPort(host, port)}
	c.token = strings.TrimSpace(string(tok))
	c.http.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return c, nil
}

// readSA reads a file of the pod's service account, small and its own.
func readSA(name string) ([]byte, error) {
	f, err := os.Open(filepath.Join(saDir, name))
	if err != nil {
		return nil, fmt.Errorf("the pod's service account: %w", err)
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, 1<<20))
}

// Namespace is where the client's Jobs go.
func (c *Client) Namespace() string { return c.ns }

// CreateJob creates j in the client's namespace.
func (c *Client) CreateJob(ctx context.Context, j *Job) error {
	j.Metadata.Namespace = c.ns
	y, err := j.YAML()
	if err != nil {
		return err
	}
	_, err = c.do(ctx, http.MethodPost, c.jobs(""), "application/yaml", y, maxObject, http.StatusCreated)
	return err
}

// JobState is what the API says of a Job's pods.
type JobState struct {
	Active, Succeeded, Failed int
	// Done: the Job's Complete or Failed condition holds; Failure is
	// the latter's reason and message.
	Done    bool
	Failure string
}

// Job reads the state of the Job name.
func (c *Client) Job(ctx context.Context, name string) (JobState, error) {
	b, err := c.do(ctx, http.MethodGet, c.jobs(name), "", nil, maxObject, http.StatusOK)
	if err != nil {
		return JobState{}, err
	}
	var j struct {
		Status struct {
			Active, Succeeded, Failed int
			Conditions                []struct{ Type, Status, Reason, Message string }
		}
	}
	if err := json.Unmarshal(b, &j); err != nil {
		return JobState{}, fmt.Errorf("job %s: %w", name, err)
	}
	s := JobState{Active: j.Status.Active, Succeeded: j.Status.Succeeded, Failed: j.Status.Failed}
	for _, cd := range j.Status.Conditions {
		if cd.Status != "True" {
			continue
		}
		switch cd.Type {
		case "Complete":
			s.Done = true
		case "Failed":
			s.Done, s.Failure = true, strings.TrimSpace(cd.Reason+": "+cd.Message)
		}
	}
	return s, nil
}

// WaitJob polls the Job every interval until it is done or ctx ends.
func (c *Client) WaitJob(ctx context.Context, name string, every time.Duration) (JobState, error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s, err := c.Job(ctx, name)
		if err != nil || s.Done {
			return s, err
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("job %s: %d of its pods active, %d succeeded, %d failed when the wait ended: %w", name, s.Active, s.Succeeded, s.Failed, ctx.Err())
		case <-t.C:
		}
	}
}

// PodLog is one worker pod's log.
type PodLog struct {
	Pod string
	// Index is its completion index (-1 when the pod does not say).
	Index int
	Log   []byte
}

// Logs reads the log of every pod of the Job name (the pods kubejob.New
// labels with it), each up to MaxLog bytes, by completion index.
func (c *Client) Logs(ctx context.Context, name string) ([]PodLog, error) {
	q := url.Values{"labelSelector": {jobLabel + "=" + name}}
	b, err := c.do(ctx, http.MethodGet, c.path("/api/v1/namespaces", c.ns, "pods")+"?"+q.Encode(), "", nil, maxObject, http.StatusOK)
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Metadata struct {
				Name        string
				Annotations map[string]string
			}
		}
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("the pods of job %s: %w", name, err)
	}
	var out []PodLog
	for _, p := range list.Items {
		idx := -1
		if s, ok := p.Metadata.Annotations[indexAnnotation]; ok {
			if n, err := strconv.Atoi(s); err == nil {
				idx = n
			}
		}
		q := url.Values{"limitBytes": {strconv.Itoa(MaxLog)}}
		lb, err := c.do(ctx, http.MethodGet, c.path("/api/v1/namespaces", c.ns, "pods", p.Metadata.Name, "log")+"?"+q.Encode(), "", nil, MaxLog, http.StatusOK)
		if err != nil {
			return nil, err
		}
		out = append(out, PodLog{Pod: p.Metadata.Name, Index: idx, Log: lb})
	}
	slices.SortFunc(out, func(a, b PodLog) int { return a.Index - b.Index })
	return out, nil
}

// DeleteJob deletes the Job name and, in the background, its pods. A
// Job already gone is no error.
func (c *Client) DeleteJob(ctx context.Context, name string) error {
	q := url.Values{"propagationPolicy": {"Background"}}
	_, err := c.do(ctx, http.MethodDelete, c.jobs(name)+"?"+q.Encode(), "", nil, maxObject, http.StatusOK, http.StatusAccepted, http.StatusNotFound)
	return err
}

// jobLabel is the label kubejob.New puts on the Job and its pods;
// indexAnnotation the completion index the Job controller writes on a
// pod.
const (
	jobLabel        = "netdoctor.io/job"
	indexAnnotation = "batch.kubernetes.io/job-completion-index"
)

func (c *Client) jobs(name string) string {
	if name == "" {
		return c.path("/apis/batch/v1/namespaces", c.ns, "jobs")
	}
	return c.path("/apis/batch/v1/namespaces", c.ns, "jobs", name)
}

// path joins the API's path segments, each escaped.
func (c *Client) path(prefix string, segs ...string) string {
	p := prefix
	for _, s := range segs {
		p += "/" + url.PathEscape(s)
	}
	return p
}

// do makes one call and returns its body, up to limit bytes, when its
// status is one of want; else the API's message.
func (c *Client) do(ctx context.Context, method, path, ctype string, body []byte, limit int64, want ...int) ([]byte, error) {
	ref, err := url.Parse(path)
	if err != nil {
		return nil, err
	}
	u := *c.base
	u.Path, u.RawPath, u.RawQuery = strings.TrimSuffix(u.Path, "/")+ref.Path, "", ref.RawQuery
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kubernetes API: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if err != nil {
		return nil, fmt.Errorf("kubernetes API: %s %s: %w", method, ref.Path, err)
	}
	if slices.Contains(want, resp.StatusCode) {
		return b, nil
	}
	var st struct{ Message string }
	msg := strings.TrimSpace(string(b[:min(len(b), 200)]))
	if json.Unmarshal(b, &st) == nil && st.Message != "" {
		msg = st.Message
	}
	// The answer is the API server's words: printed without its
	// control bytes, as everything read from elsewhere.
	return nil, fmt.Errorf("kubernetes API: %s %s: %s: %s", method, ref.Path, printable.String(resp.Status), printable.String(msg))
}
