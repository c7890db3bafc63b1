package kubejob

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestClientErrors: the API server's refusals come back as one line
// with its message, its control bytes escaped; a Job already gone is no
// error to delete; an answer past its bound is cut, not held.
func TestClientErrors(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"kind":"Status","message":"jobs.batch is forbidden: User \"system:serviceaccount:perf:x\" cannot create\u001b[2J"}`))
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNotFound)
		default:
			w.Write([]byte(`{"status":{"active":0,"succeeded":2,"conditions":[{"type":"Complete","status":"True"}]}}`))
		}
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, "perf")
	if err != nil {
		t.Fatal(err)
	}
	j, err := New(Spec{Name: "netdoctor-capacity-step-1", Workers: 2, StartAt: time.Now().Add(time.Minute)}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	err = c.CreateJob(t.Context(), j)
	if err == nil || !strings.Contains(err.Error(), "403 Forbidden: jobs.batch is forbidden") || strings.ContainsRune(err.Error(), 0x1b) {
		t.Errorf("create refused: %v", err)
	}
	if err := c.DeleteJob(t.Context(), "gone"); err != nil {
		t.Errorf("delete of a Job already gone: %v", err)
	}
	st, err := c.WaitJob(t.Context(), "netdoctor-capacity-step-1", 10*time.Millisecond)
	if err != nil || !st.Done || st.Succeeded != 2 {
		t.Errorf("wait: %+v %v", st, err)
	}
	for _, bad := range []string{"ftp://x", "kubernetes", "http://"} {
		if _, err := NewClient(bad, ""); err == nil {
			t.Errorf("--kube-api %q accepted", bad)
		}
	}
}
