package lab

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestStallHoldsEveryNth: with Every 3, the 3rd and 6th requests wait
// Hold, the others are answered at once; with Every 0, none waits.
func TestStallHoldsEveryNth(t *testing.T) {
	const hold = 300 * time.Millisecond
	for _, tt := range []struct {
		every int
		held  []bool
	}{
		{3, []bool{false, false, true, false, false, true}},
		{0, []bool{false, false, false, false, false, false}},
	} {
		srv := httptest.NewServer(Stall{Every: tt.every, Hold: hold}.handler())
		for i, want := range tt.held {
			start := time.Now()
			resp, err := srv.Client().Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			took := time.Since(start)
			if resp.StatusCode != http.StatusOK || string(b) != "hello from the stalling server\n" {
				t.Errorf("every %d, request %d: %d %q", tt.every, i+1, resp.StatusCode, b)
			}
			if got := took >= hold; got != want {
				t.Errorf("every %d, request %d took %v: held %v, want %v", tt.every, i+1, took, got, want)
			}
		}
		srv.Close()
	}
}
