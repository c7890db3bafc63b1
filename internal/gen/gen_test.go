package gen

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenerated: every generated file in the repository is what the code
// makes now, byte for byte; a stale one names the command that writes
// it again.
func TestGenerated(t *testing.T) {
	files, err := Files("../..")
	if err != nil {
		t.Fatalf("%v (%s)", err, Command)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join("../..", f.Path))
		if err != nil {
			t.Errorf("%v: run %s", err, Command)
			continue
		}
		if !bytes.Equal(got, f.Data) {
			t.Errorf("%s is stale: run %s", f.Path, Command)
		}
	}
}

// TestMarkdownBlocks: a generated block is replaced whole, the text
// around it kept; a document without one, or with one left open, is an
// error.
func TestMarkdownBlocks(t *testing.T) {
	var doc strings.Builder
	doc.WriteString("# Findings\n\nby hand\n")
	for name := range findingsBlocks {
		doc.WriteString(beginMark + name + " -->\nstale\n" + endMark + "\nby hand, after " + name + "\n")
	}
	out, err := Markdown([]byte(doc.String()), findingsBlocks)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "stale") || !strings.Contains(string(out), "by hand, after summary") || !strings.Contains(string(out), "| `accept-queue-overflow` |") || !strings.Contains(string(out), "\n## accept-queue-overflow\n") {
		t.Errorf("Markdown:\n%s", out)
	}
	if again, _ := Markdown(out, findingsBlocks); !bytes.Equal(again, out) {
		t.Error("Markdown is not idempotent")
	}
	if _, err := Markdown([]byte("# Findings\n"), findingsBlocks); err == nil {
		t.Error("a document without the blocks")
	}
	if _, err := Markdown([]byte(beginMark+"summary -->\n"), findingsBlocks); err == nil {
		t.Error("a block without its end")
	}
}
