package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/netdoctor/netdoctor/internal/layer"
)

// TestEndpoint is the layer-test endpoint an agent offers when asked
// (`agent --test-endpoint`): TCP and UDP on one port, for `load tcp://`,
// `load udp://` and run's path probe. It admits only clients holding the
// agent's token and bounds what they may ask for (package layer).
type TestEndpoint struct {
	ln  net.Listener
	pc  net.PacketConn
	srv *layer.Server
}

// ListenTestEndpoint opens addr for TCP and UDP. token must not be empty.
func ListenTestEndpoint(addr string, token []byte, log *slog.Logger) (*TestEndpoint, error) {
	srv, err := layer.NewServer(token, log)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("test endpoint: %w", err)
	}
	// UDP on the port TCP got, which matters when addr's port is 0.
	pc, err := net.ListenPacket("udp", ln.Addr().String())
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("test endpoint: %w", err)
	}
	return &TestEndpoint{ln: ln, pc: pc, srv: srv}, nil
}

// Addr is the address the endpoint listens on.
func (t *TestEndpoint) Addr() string { return t.ln.Addr().String() }

// Serve serves tests until ctx ends, then closes the sockets.
func (t *TestEndpoint) Serve(ctx context.Context) error { return t.srv.Serve(ctx, t.ln, t.pc) }

// Close closes the sockets; Serve then returns.
func (t *TestEndpoint) Close() {
	t.ln.Close()
	t.pc.Close()
}
