//go:build !linux

package collect

import (
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

// linkReader describes devices on Linux only.
type linkReader struct{}

func newLinkReader() *linkReader { return &linkReader{} }

// elsewhere has nothing to say off Linux.
func (r *linkReader) elsewhere(map[uint64][]int) []evidence.Link { return nil }

func interfaces(p procnet.Proc, _ *linkReader) ([]evidence.Interface, error) { return p.Dev() }
