package nftables

import (
	"errors"
	"fmt"
	"strings"

	gnft "github.com/google/nftables"
	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// ErrUnavailable marks a namespace whose rules cannot be read: no
// permission, or a kernel without nf_tables.
var ErrUnavailable = errors.New("nftables unavailable")

// Read lists the rules of the calling thread's network namespace that
// drop, reject or limit packets, and the base chains whose policy
// drops, with their counters. A namespace without tables has none.
func Read() (*evidence.Firewall, error) {
	c, err := gnft.New(gnft.AsLasting())
	if err != nil {
		return nil, unavailable(err)
	}
	defer c.CloseLasting()
	chains, err := c.ListChains()
	if err != nil {
		return nil, unavailable(err)
	}
	fw := &evidence.Firewall{}
	sets := map[string][]string{}
	for _, ch := range chains {
		fam := byte(ch.Table.Family)
		hook := hookName(fam, ch)
		ipt := iptablesTable(fam, ch.Table.Name)
		base := evidence.FirewallRule{Family: familyName(fam), Table: ch.Table.Name, Chain: ch.Name, Hook: hook}
		if ch.Policy != nil && *ch.Policy == gnft.ChainPolicyDrop && hook != "" {
			r := base
			r.Text, r.Verdict = "policy drop", "drop"
			if ipt {
				r.Iptables = "-P " + ch.Name + " DROP"
			}
			addRule(fw, r)
		}
		rules, err := c.GetRules(ch.Table, ch)
		if err != nil {
			return fw, fmt.Errorf("rules of %s %s %s: %w", base.Family, base.Table, base.Chain, err)
		}
		for _, r := range rules {
			d := decode(fam, r.Exprs, func(name string) []string {
				key := ch.Table.Name + "\x00" + familyName(fam) + "\x00" + name
				if v, ok := sets[key]; ok {
					return v
				}
				v := setElems(c, ch.Table, name)
				sets[key] = v
				return v
			})
			if !discards(d) {
				continue
			}
			fr := base
			fr.Handle = r.Handle
			fr.Text = strings.Join(d.nft, " ")
			if ipt {
				fr.Iptables = "-A " + ch.Name + " " + strings.Join(d.ipt, " ")
			}
			fr.Verdict, fr.Limit, fr.Over = d.verdict, d.limit, d.over
			fr.Counted, fr.Packets, fr.Bytes = d.counted, d.packets, d.bytes
			addRule(fw, fr)
		}
	}
	return fw, nil
}

// setElems are an anonymous set's elements as text, nil when they
// cannot be read (a named set is shown by its name).
func setElems(c *gnft.Conn, t *gnft.Table, name string) []string {
	if !strings.HasPrefix(name, "__set") {
		return nil
	}
	s, err := c.GetSetByName(t, name)
	if err != nil {
		return nil
	}
	es, err := c.GetSetElements(s)
	if err != nil {
		return nil
	}
	out := []string{}
	for _, e := range es {
		if e.IntervalEnd {
			continue
		}
		out = append(out, elemFormatter(e.Key))
	}
	return out
}

func unavailable(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}
