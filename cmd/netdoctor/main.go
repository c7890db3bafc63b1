// Command netdoctor finds why a Linux service is slow under load.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/netdoctor/netdoctor/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
