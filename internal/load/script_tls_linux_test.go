package load

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// selfSigned returns a certificate for 127.0.0.1, made for the test.
func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "netdoctor test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// newTLSRecorder is newRecorder's server over TLS with a self-signed
// certificate.
func newTLSRecorder(t *testing.T) *recorder {
	t.Helper()
	r := newUnstartedRecorder()
	r.TLS = &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}}
	r.StartTLS()
	t.Cleanup(r.Close)
	return r
}

// runScriptOn runs a script from testdata/scripts against srv and
// returns the result, what done printed and what the server saw.
func runScriptOn(t *testing.T, eng Engine, srv *recorder, script string, conns int, dur time.Duration, args ...string) (*Result, string, map[string]int) {
	t.Helper()
	var buf bytes.Buffer
	res, err := Run(context.Background(), Options{Engine: eng, URL: srv.URL + "/", Threads: 2, Connections: conns,
		Duration: dur, Script: mustScript(t, script), ScriptArgs: args, ScriptOut: &buf})
	if err != nil {
		t.Fatalf("%s on %s: %v", script, srv.URL, err)
	}
	if err := res.ScriptDone(); err != nil {
		t.Fatal(err)
	}
	return res, buf.String(), srv.take()
}

// TestScriptHTTPSLikeHTTP: request(), response() and pipelines send the
// same requests in the same proportions over https as over http.
func TestScriptHTTPSLikeHTTP(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		plain, secure := newRecorder(t), newTLSRecorder(t)
		for _, c := range []struct {
			script string
			args   []string
		}{{"paths.lua", []string{"run-7"}}, {"auth.lua", nil}, {"pipeline.lua", nil}} {
			_, _, h := runScriptOn(t, eng, plain, c.script, 4, time.Second, c.args...)
			res, _, s := runScriptOn(t, eng, secure, c.script, 4, time.Second, c.args...)
			t.Logf("%s: http %d requests, https %d", c.script, total(h), total(s))
			compareShares(t, "http", h, "https", s)
			if res.Errors != (Errors{}) || res.Status["4xx"] != 0 {
				t.Errorf("%s over https: errors %+v, status %v", c.script, res.Errors, res.Status)
			}
			if got, want := res.Requests, uint64(total(s)); got+12 < want || got > want {
				t.Errorf("%s over https: counted %d responses, the server answered %d", c.script, got, want)
			}
		}
	})
}

// TestScriptHTTPSResponse: over https, response() gets each response's
// status, headers and body, and done sees them all; a thread's static
// request is its own.
func TestScriptHTTPSResponse(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		srv := newTLSRecorder(t)
		res, out, seen := runScriptOn(t, eng, srv, "response.lua", 4, time.Second)
		var login, denied, other, n int
		if _, err := fmt.Sscanf(out, "response login %d denied %d other %d of %d", &login, &denied, &other, &n); err != nil {
			t.Fatalf("done printed %q: %v", out, err)
		}
		if other != 0 || login < 50 || denied < 50 || login+denied != n || uint64(n) != res.Requests {
			t.Errorf("response() saw login %d, denied %d, other %d of %d (result %d); want only the server's, all of them",
				login, denied, other, n, res.Requests)
		}
		if seen[`GET /login [] ""`] == 0 || seen[`GET /api/items [] ""`] == 0 {
			t.Errorf("the server saw %v", seen)
		}
		// Without request(), each thread sends the request its own init made.
		_, _, seen = runScriptOn(t, eng, srv, "counters.lua", 4, time.Second)
		for _, k := range []string{`PUT / [X-Thread=t1] "from thread 1"`, `PUT / [X-Thread=t2] "from thread 2"`} {
			if s := share(seen, k); s < 0.3 {
				t.Errorf("counters.lua: %s is %.2f of the requests, want about half", k, s)
			}
		}
	})
}

// TestScriptHTTPSDelayStop: delay() spaces each connection's requests,
// and thread:stop() ends a thread's, over https as over http.
func TestScriptHTTPSDelayStop(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		srv := newTLSRecorder(t)
		_, _, seen := runScriptOn(t, eng, srv, "delay.lua", 4, 2*time.Second)
		if n := total(seen); n < 200 || n > 420 {
			t.Errorf("delay.lua sent %d requests, want at most 400 (20 ms apart on 4 connections for 2 s) and at least half", n)
		}
		_, _, seen = runScriptOn(t, eng, srv, "stop.lua", 2, time.Second)
		if n := total(seen); n < 100 || n > 104 {
			t.Errorf("stop.lua sent %d requests, want 100 (50 per thread)", n)
		}
	})
}

// TestClosedAtEnd: when a run ends, its connections are closed at once,
// over http and https, with either engine (io_uring's sockets are
// closed by the loop's own thread before its ring: left to the ring's
// teardown, a server saw them open for seconds).
func TestClosedAtEnd(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		for _, srv := range []*recorder{newRecorder(t), newTLSRecorder(t)} {
			res, err := Run(context.Background(), Options{Engine: eng, URL: srv.URL + "/", Threads: 2, Connections: 8, Duration: 500 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			open := func() int { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.open }
			if !poll.Wait(2*time.Second, func() bool { return open() == 0 }) {
				t.Errorf("%s: %d connections still open %v after the run (%d requests)", srv.URL, open(), time.Since(start), res.Requests)
			}
		}
	})
}
