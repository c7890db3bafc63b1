package load

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestTLSConnRecords: the event loop's TLS, moved by hand over a pipe
// to crypto/tls's server: the handshake suspends for the server's bytes
// and resumes, requests go out as records, and responses come back as
// plaintext, a record at a time, whatever the bytes' boundaries.
func TestTLSConnRecords(t *testing.T) {
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t.Run(tls.VersionName(v), func(t *testing.T) {
			cli, srv := net.Pipe()
			defer cli.Close()
			cfg := &tls.Config{Certificates: []tls.Certificate{selfSigned(t)}, MinVersion: v, MaxVersion: v}
			served := make(chan error, 1)
			go func() {
				s := tls.Server(srv, cfg)
				defer s.Close()
				br := bufio.NewReader(s)
				for range 3 {
					req, err := http.ReadRequest(br)
					if err != nil {
						served <- err
						return
					}
					io.WriteString(s, "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n")
					_ = req
				}
				served <- nil
			}()
			// The server's bytes, as the socket would deliver them.
			from := make(chan []byte, 64)
			go func() {
				for {
					b := make([]byte, 7) // small reads: records split anyhow
					n, err := cli.Read(b)
					if n > 0 {
						from <- b[:n]
					}
					if err != nil {
						close(from)
						return
					}
				}
			}()
			send := func(tc *tlsConn) {
				if b := tc.pending(); b != nil {
					if _, err := cli.Write(b); err != nil {
						t.Fatal(err)
					}
				}
			}
			recv := func() []byte {
				select {
				case b, ok := <-from:
					if !ok {
						t.Fatal("server closed")
					}
					return b
				case <-time.After(5 * time.Second):
					t.Fatal("no bytes from the server in 5 s")
				}
				return nil
			}
			tc := newTLSConn(&tls.Config{InsecureSkipVerify: true, ServerName: "127.0.0.1"})
			defer tc.close()
			done, err := tc.handshake()
			for !done && err == nil {
				send(tc)
				done, err = tc.feed(recv())
			}
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			send(tc) // the client's Finished
			buf := make([]byte, 1024)
			for i := range 3 {
				if err := tc.write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
					t.Fatal(err)
				}
				send(tc)
				var got strings.Builder
				for !strings.HasSuffix(got.String(), "hello\n") {
					if _, err := tc.feed(recv()); err != nil {
						t.Fatal(err)
					}
					for {
						n, err := tc.read(buf)
						if err != nil {
							t.Fatalf("response %d: %v", i, err)
						}
						if n == 0 {
							break
						}
						got.Write(buf[:n])
					}
					send(tc) // whatever reading made it answer
				}
				if !strings.HasPrefix(got.String(), "HTTP/1.1 200 OK\r\n") {
					t.Errorf("response %d: %q", i, got.String())
				}
			}
			if err := <-served; err != nil {
				t.Errorf("server: %v", err)
			}
		})
	}
}
