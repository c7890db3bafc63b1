//go:build !linux

package collect

import (
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

func interfaces(p procnet.Proc) ([]evidence.Interface, error) { return p.Dev() }
