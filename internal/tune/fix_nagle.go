package tune

import "github.com/netdoctor/netdoctor/internal/report"

// This file fixes the findings of rules/nagle.go: small responses held
// back by Nagle's algorithm until the client's delayed ACK.

// nodelay turns tcp_nodelay back on where it was turned off. A stall on
// a leg from a server to a dependency (About.Remotes) is set on the
// sending side's sockets by its own code or library, which tune does not
// edit: its finding's advice stands.
func (b *builder) nodelay(f report.Finding) error {
	if len(f.About.Remotes) > 0 {
		return nil
	}
	for _, s := range b.in.Servers {
		if s.Nginx == nil {
			continue
		}
		for _, src := range s.Nginx.NoDelayOff {
			if err := b.editNginx(s, src, f, "tcp_nodelay on (nginx's default): with it off, a response's last small segment waits for the client's delayed ACK (~40 ms) on keep-alive connections",
				edit{replace: setNginxArgs("tcp_nodelay", "on")}); err != nil {
				return err
			}
		}
	}
	return nil
}
