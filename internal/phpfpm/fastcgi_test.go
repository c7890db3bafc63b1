package phpfpm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The files in testdata/fastcgi are responses of php-fpm 8.2.36 captured by
// TestRealFPM with -capture.
func readCapture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/fastcgi", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeCaptured(t *testing.T) {
	tests := []struct {
		file       string
		wantStdout string // prefix
		wantStderr string // prefix
		wantErr    error
		wantCode   int
	}{
		{file: "status-json.bin", wantStdout: "Expires: Thu, 01 Jan 1970"},
		{file: "not-found.bin", wantStdout: "Status: 404 Not Found", wantStderr: "Primary script unknown", wantErr: ErrNoStatus, wantCode: 404},
		{file: "access-denied.bin", wantStdout: "Status: 403 Forbidden", wantStderr: "Access to the script", wantErr: ErrNoStatus, wantCode: 403},
	}
	for _, tt := range tests {
		r, err := decodeResponse(readCapture(t, tt.file), statusRequestID)
		if err != nil {
			t.Errorf("decodeResponse(%s) error = %v", tt.file, err)
			continue
		}
		if !bytes.HasPrefix(r.stdout, []byte(tt.wantStdout)) || !bytes.HasPrefix(r.stderr, []byte(tt.wantStderr)) {
			t.Errorf("decodeResponse(%s) stdout %q stderr %q", tt.file, r.stdout, r.stderr)
		}
		_, err = parseStatusPage("/status", r)
		var se *StatusError
		if !errors.Is(err, tt.wantErr) || (tt.wantErr != nil && (!errors.As(err, &se) || se.Code != tt.wantCode)) {
			t.Errorf("parseStatusPage(%s) error = %v, want %v with code %d", tt.file, err, tt.wantErr, tt.wantCode)
		}
	}
}

func rec(typ uint8, id uint16, content string) []byte {
	return appendRecord(nil, typ, id, []byte(content))
}

func endRec(id uint16, protocolStatus uint8) []byte {
	return rec(fcgiEndRequest, id, string([]byte{0, 0, 0, 0, protocolStatus, 0, 0, 0}))
}

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func TestDecodeHostile(t *testing.T) {
	big := bytes.Repeat([]byte("x"), fcgiMaxContent)
	var tooLarge []byte
	for range maxStdoutBytes/fcgiMaxContent + 1 {
		tooLarge = append(tooLarge, appendRecord(nil, fcgiStdout, 1, big)...)
	}
	var loud []byte
	for range 3 {
		loud = append(loud, appendRecord(nil, fcgiStderr, 1, big[:maxStderrBytes-1])...)
	}
	tests := []struct {
		name       string
		in         []byte
		wantStdout string
		wantErr    bool
	}{
		{name: "empty", in: nil, wantErr: true},
		{name: "header only", in: rec(fcgiStdout, 1, "abc")[:8], wantErr: true},
		{name: "version 2", in: append([]byte{2}, endRec(1, 0)[1:]...), wantErr: true},
		{name: "short end body", in: rec(fcgiEndRequest, 1, "abc"), wantErr: true},
		{name: "overloaded", in: endRec(1, 2), wantErr: true},
		{name: "other request ignored", in: cat(rec(fcgiStdout, 2, "no"), rec(fcgiStdout, 1, "yes"), endRec(2, 0), endRec(1, 0)), wantStdout: "yes"},
		{name: "unknown type ignored", in: cat(rec(11, 1, "?"), rec(fcgiStdout, 1, "a"), rec(fcgiStdout, 1, ""), rec(fcgiStdout, 1, "b"), endRec(1, 0)), wantStdout: "ab"},
		{name: "after end ignored", in: cat(rec(fcgiStdout, 1, "a"), endRec(1, 0), rec(fcgiStdout, 1, "b")), wantStdout: "a"},
		{name: "stdout over limit", in: tooLarge, wantErr: true},
		{name: "stderr cut", in: cat(loud, rec(fcgiStdout, 1, "ok"), endRec(1, 0)), wantStdout: "ok"},
	}
	for _, tt := range tests {
		r, err := decodeResponse(tt.in, 1)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: decodeResponse() error = %v, want error %v", tt.name, err, tt.wantErr)
			continue
		}
		if err == nil && string(r.stdout) != tt.wantStdout {
			t.Errorf("%s: stdout = %q, want %q", tt.name, r.stdout, tt.wantStdout)
		}
		if len(r.stderr) > maxStderrBytes {
			t.Errorf("%s: kept %d bytes of stderr, limit %d", tt.name, len(r.stderr), maxStderrBytes)
		}
	}
}

// readParams decodes FCGI_PARAMS content the way php-fpm's
// fcgi_get_params does.
func readParams(t *testing.T, b []byte) map[string]string {
	t.Helper()
	out := map[string]string{}
	length := func() int {
		if len(b) > 0 && b[0] < 128 {
			n := int(b[0])
			b = b[1:]
			return n
		}
		if len(b) < 4 {
			t.Fatalf("short length in params")
		}
		n := int(binary.BigEndian.Uint32(b) &^ (1 << 31))
		b = b[4:]
		return n
	}
	for len(b) > 0 {
		nl, vl := length(), length()
		if len(b) < nl+vl {
			t.Fatalf("short params")
		}
		out[string(b[:nl])] = string(b[nl : nl+vl])
		b = b[nl+vl:]
	}
	return out
}

func TestEncodeRequest(t *testing.T) {
	long := strings.Repeat("v", 300)
	b, err := encodeRequest(7, [][2]string{{"A", "1"}, {"LONG", long}, {strings.Repeat("K", 200), ""}})
	if err != nil {
		t.Fatal(err)
	}
	var types []uint8
	var params []byte
	for len(b) > 0 {
		r, n, err := readRecord(b)
		if err != nil {
			t.Fatalf("readRecord() error = %v", err)
		}
		if r.requestID != 7 || n%8 != 0 {
			t.Errorf("record %d: id %d, %d bytes (want id 7, padded to 8)", r.typ, r.requestID, n)
		}
		types = append(types, r.typ)
		switch r.typ {
		case fcgiBeginRequest:
			if !bytes.Equal(r.content, []byte{0, fcgiResponder, 0, 0, 0, 0, 0, 0}) {
				t.Errorf("begin body = %v, want responder without keep-conn", r.content)
			}
		case fcgiParams:
			params = append(params, r.content...)
		}
		b = b[n:]
	}
	if diff := cmp.Diff([]uint8{fcgiBeginRequest, fcgiParams, fcgiParams, fcgiStdin}, types); diff != "" {
		t.Errorf("record types mismatch (-want +got):\n%s", diff)
	}
	want := map[string]string{"A": "1", "LONG": long, strings.Repeat("K", 200): ""}
	if diff := cmp.Diff(want, readParams(t, params)); diff != "" {
		t.Errorf("params mismatch (-want +got):\n%s", diff)
	}
	if _, err := encodeRequest(1, [][2]string{{"X", strings.Repeat("v", fcgiMaxContent)}}); err == nil {
		t.Error("encodeRequest() accepted params larger than a record")
	}
}

// TestStatusReplay serves a captured php-fpm answer over a pipe, one byte
// at a time, and checks what Status sent and what it made of the answer.
// It runs without root or php-fpm.
func TestStatusReplay(t *testing.T) {
	answer := readCapture(t, "status-json.bin")
	client, server := net.Pipe()
	sent := make(chan map[string]string, 1)
	go func() {
		defer server.Close()
		var req []byte
		buf := make([]byte, 512)
		for !bytes.Contains(req, rec(fcgiStdin, statusRequestID, "")) {
			n, err := server.Read(buf)
			if err != nil {
				sent <- nil
				return
			}
			req = append(req, buf[:n]...)
		}
		_, n, _ := readRecord(req)
		p, _, _ := readRecord(req[n:])
		sent <- readParams(t, p.content)
		for i := range answer {
			if _, err := server.Write(answer[i : i+1]); err != nil {
				return
			}
		}
	}()
	dial := func(context.Context) (net.Conn, error) { return client, nil }
	st, err := Status(context.Background(), dial, "/status")
	if err != nil {
		t.Fatalf("Status() error = %v", err)
	}
	want := &PoolStatus{
		Pool: "tcp", ProcessManager: "static", StartTime: time.Unix(1795315491, 0),
		AcceptedConn: 5, ListenQueueLen: 4096, ActiveProcesses: 2, TotalProcesses: 2, MaxActiveProcesses: 2,
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("Status() mismatch (-want +got):\n%s", diff)
	}
	params := <-sent
	for k, v := range map[string]string{"SCRIPT_NAME": "/status", "SCRIPT_FILENAME": "/status", "QUERY_STRING": "json", "REQUEST_METHOD": "GET", "REQUEST_URI": "/status?json"} {
		if params[k] != v {
			t.Errorf("sent %s = %q, want %q", k, params[k], v)
		}
	}
}

func TestStatusArguments(t *testing.T) {
	dial := func(context.Context) (net.Conn, error) { return nil, errors.New("must not dial") }
	if _, err := Status(context.Background(), dial, ""); !errors.Is(err, ErrNoStatus) {
		t.Errorf("Status(\"\") error = %v, want ErrNoStatus", err)
	}
	if _, err := Status(context.Background(), dial, "status"); err == nil || errors.Is(err, ErrNoStatus) {
		t.Errorf("Status(\"status\") error = %v, want a bad-path error", err)
	}
}

// FuzzDecodeResponse feeds arbitrary bytes to the record decoder, whole
// and in two pieces as they may arrive, then to the page parser.
func FuzzDecodeResponse(f *testing.F) {
	for _, name := range []string{"status-json.bin", "not-found.bin", "access-denied.bin"} {
		f.Add(readCapture(f, name), uint16(64))
	}
	f.Add(cat(rec(fcgiStdout, 1, "Status: 200\r\nContent-Type: application/json\r\n\r\n{}"), endRec(1, 0)), uint16(3))
	f.Add(cat(rec(fcgiStdout, 1, "\n\n"), rec(fcgiStderr, 1, "e"), endRec(1, 3)), uint16(0))
	f.Add([]byte{1, 6, 0, 1, 0xff, 0xff, 0xff, 0}, uint16(8))
	f.Fuzz(func(t *testing.T, b []byte, split uint16) {
		whole, errWhole := decodeResponse(b, statusRequestID)
		if len(whole.stdout) > maxStdoutBytes || len(whole.stderr) > maxStderrBytes {
			t.Fatalf("kept %d/%d bytes of stdout/stderr", len(whole.stdout), len(whole.stderr))
		}
		if errWhole == nil && !whole.done {
			t.Fatal("no error but no end of request")
		}
		// The same bytes in two reads must decode the same.
		cut := int(split) % (len(b) + 1)
		var r response
		buf := append([]byte(nil), b[:cut]...)
		used, err := r.decode(buf, statusRequestID)
		if err == nil {
			buf = append(buf[used:], b[cut:]...)
			_, err = r.decode(buf, statusRequestID)
		}
		if (errWhole == nil) != (err == nil && r.done) {
			t.Fatalf("split at %d: error %v done %v, whole error %v", cut, err, r.done, errWhole)
		}
		if errWhole == nil && (!bytes.Equal(r.stdout, whole.stdout) || !bytes.Equal(r.stderr, whole.stderr)) {
			t.Fatalf("split at %d: stdout %q, whole %q", cut, r.stdout, whole.stdout)
		}
		if errWhole == nil {
			_, _ = parseStatusPage("/status", whole)
		}
	})
}
