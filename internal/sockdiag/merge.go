package sockdiag

// merge adds the counts of o into s.
func (s *Summary) merge(o *Summary) {
	for i := range s.tcp {
		s.tcp[i] += o.tcp[i]
		s.unix[i] += o.unix[i]
	}
	s.listeners = append(s.listeners, o.listeners...)
	s.drops = append(s.drops, o.drops...)
	if o.listenPorts != nil {
		if s.listenPorts == nil {
			s.listenPorts = new([65536 / 64]uint64)
		}
		for i, w := range o.listenPorts {
			s.listenPorts[i] |= w
		}
	}
	for port, c := range o.inbound {
		if s.inbound == nil {
			s.inbound = make(map[uint16]*inboundCount, len(o.inbound))
		}
		if t := s.inbound[port]; t != nil {
			t.established += c.established
			t.unread += c.unread
			t.closeWait += c.closeWait
		} else {
			s.inbound[port] = c
		}
	}
	if len(o.remotes) > 0 && s.remotes == nil {
		s.remotes = make(map[remoteKey]*remoteCount, len(o.remotes))
	}
	for k, c := range o.remotes {
		if t := s.remotes[k]; t != nil {
			t.established += c.established
			t.timeWait += c.timeWait
			t.other += c.other
			t.ephemeral += c.ephemeral
		} else {
			s.remotes[k] = c
		}
	}
}
