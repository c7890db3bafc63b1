package lab

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// TestStallHoldsEveryNth: with Every 3, the 3rd and 6th requests wait
// Hold, the others are answered at once; with Every 0, none waits. The
// hold is an hour: a held request is seen parked in the handler, then
// given up by its client, so no clock decides which requests were held.
func TestStallHoldsEveryNth(t *testing.T) {
	for _, tt := range []struct {
		every int
		held  []bool
	}{
		{3, []bool{false, false, true, false, false, true}},
		{0, []bool{false, false, false, false, false, false}},
	} {
		srv := httptest.NewServer(Stall{Every: tt.every, Hold: time.Hour}.handler())
		for i, want := range tt.held {
			ctx, cancel := context.WithCancel(context.Background())
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			type answer struct {
				status int
				body   string
				err    error
			}
			done := make(chan answer, 1)
			go func() {
				resp, err := srv.Client().Do(req)
				if err != nil {
					done <- answer{err: err}
					return
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				done <- answer{resp.StatusCode, string(b), err}
			}()
			if want {
				poll.True(t, time.Minute, "the request held in the handler", func() bool { return stalled() == 1 })
				cancel()
				if a := <-done; a.err == nil {
					t.Errorf("every %d, request %d: answered %d %q, want held", tt.every, i+1, a.status, a.body)
				}
				poll.True(t, time.Minute, "the held handler gone with its client", func() bool { return stalled() == 0 })
				continue
			}
			select {
			case a := <-done:
				if a.err != nil || a.status != http.StatusOK || a.body != "hello from the stalling server\n" {
					t.Errorf("every %d, request %d: %d %q %v", tt.every, i+1, a.status, a.body, a.err)
				}
			case <-time.After(time.Minute):
				t.Fatalf("every %d, request %d: held, want answered at once", tt.every, i+1)
			}
			cancel()
		}
		srv.Close()
	}
}

// stalled counts the stalling server's handlers parked in a hold.
func stalled() int {
	// Stall.handler.func, inlined into its caller or not.
	return poll.Goroutines(" [select", "Stall.handler.func")
}
