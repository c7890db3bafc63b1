package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/layer"
)

// TestLayerTCPDiscard: load tcp:// against a plain server that reads
// and discards measures the upload, and says so in text and JSON.
func TestLayerTCPDiscard(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	out := filepath.Join(t.TempDir(), "tcp.json")
	var text bytes.Buffer
	target := "tcp://" + ln.Addr().String()
	if code := Run(context.Background(), []string{"load", "-c", "2", "-d", "300ms", "--json", out, target}, &text, &text); code != ExitOK {
		t.Fatalf("exit %d: %s", code, text.String())
	}
	if !strings.Contains(text.String(), "upload") || !strings.Contains(text.String(), "stream 1") {
		t.Errorf("text:\n%s", text.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep layer.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Target != target || len(rep.TCP) != 1 || rep.TCP[0].Dir != layer.Up || rep.TCP[0].Bytes == 0 || len(rep.TCP[0].Streams) != 2 {
		t.Errorf("JSON: %s", b)
	}
}

// TestLayerUsage: what layer tests refuse before sending anything.
func TestLayerUsage(t *testing.T) {
	for _, args := range [][]string{
		{"load", "--reverse", "tcp://127.0.0.1:9"},
		{"load", "-R", "100", "udp://127.0.0.1:9"},
		{"load", "udp://127.0.0.1:9"},
		{"load", "-n", "10", "tcp://127.0.0.1:9"},
		{"load", "tcp://127.0.0.1"},
		{"agent", "--test-endpoint", "127.0.0.1:0"},
	} {
		var out bytes.Buffer
		if code := Run(context.Background(), args, &out, &out); code != ExitUsage {
			t.Errorf("%q: exit %d, want %d: %s", args, code, ExitUsage, out.String())
		}
	}
}
