// Command write writes the generated files (package gen) under the
// repository root its argument names: `go generate ./internal/gen`.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/netdoctor/netdoctor/internal/gen"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: write ROOT")
		os.Exit(2)
	}
	files, err := gen.Files(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "write:", err)
		os.Exit(1)
	}
	for _, f := range files {
		path := filepath.Join(os.Args[1], f.Path)
		if old, err := os.ReadFile(path); err == nil && string(old) == string(f.Data) {
			continue
		}
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "write:", err)
			os.Exit(1)
		}
		fmt.Println("wrote", f.Path)
	}
}
