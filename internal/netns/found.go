package netns

import "strconv"

// Found is one network namespace of the host, as All finds it, with the
// processes inside it.
type Found struct {
	NS
	PIDs []int
}

// Label names the namespace for a report: its `ip netns` name, else the
// kernel's id for it (its inode, as the kernel log prints it).
func (f Found) Label() string {
	if f.Name != "" {
		return f.Name
	}
	return strconv.FormatUint(f.Inode, 10)
}
