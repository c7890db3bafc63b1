package tune

import (
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// This file fixes the findings of rules/nagle.go: small responses held
// back by Nagle's algorithm until the client's delayed ACK.

var _ = planFix(rules.NagleDelayedACK, rankRest, (*builder).nodelay)

// nodelay turns tcp_nodelay back on where it was turned off. A stall on
// a leg from a server to a dependency (About.Remotes) is set on the
// sending side's sockets by its own code or library, which tune does not
// edit: its finding's advice stands.
func (b *builder) nodelay(f report.Finding) error {
	if len(f.About.Remotes) > 0 {
		b.note(f, "not planned, because the stall is on a leg to a dependency, whose sockets the server's own code or library sets (TCP_NODELAY): its finding's advice stands")
		return nil
	}
	nginx := false
	for _, s := range b.in.Servers {
		if s.Nginx == nil {
			continue
		}
		nginx = true
		if len(s.Nginx.NoDelayOff) == 0 {
			b.satisfied(f, "tcp_nodelay is on wherever nginx's configuration sets it")
		}
		for _, src := range s.Nginx.NoDelayOff {
			if err := b.editNginx(s, src, f, "tcp_nodelay on (nginx's default): with it off, a response's last small segment waits for the client's delayed ACK (~40 ms) on keep-alive connections",
				edit{replace: setNginxArgs("tcp_nodelay", "on")}); err != nil {
				return err
			}
		}
	}
	if !nginx && len(f.Fix) > 0 {
		b.note(f, "not planned, because netdoctor changes only nginx's tcp_nodelay: "+f.Fix[0])
	}
	return nil
}
