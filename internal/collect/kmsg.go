package collect

import (
	"context"
	"errors"
	"fmt"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/kmsg"
)

// kmsgCollector returns the kernel log records written since New. The
// reader is opened once, before the first snapshot, and positioned at the
// end of the log, so older messages never count as evidence. Where
// /dev/kmsg cannot be opened (a container's device cgroup refuses it) the
// log is read through syslog(2), which CAP_SYSLOG allows.
type kmsgCollector struct {
	r   *kmsg.Reader
	sys *kmsg.SyslogReader
	err error
}

func newKmsg() *kmsgCollector {
	r, err := kmsg.Open()
	if err == nil {
		return &kmsgCollector{r: r}
	}
	if errors.Is(err, kmsg.ErrUnavailable) {
		if sys, serr := kmsg.OpenSyslog(); serr == nil {
			return &kmsgCollector{sys: sys}
		} else {
			err = fmt.Errorf("%w; %w", err, serr)
		}
	}
	return &kmsgCollector{err: err}
}

func (k *kmsgCollector) collect(_ context.Context, s *evidence.Snapshot) error {
	var msgs []evidence.KernelMsg
	var err error
	var lost error
	switch {
	case k.r != nil:
		msgs, err = k.r.Read()
		if k.r.Lost > 0 {
			lost = fmt.Errorf("%d kernel log records were overwritten before they could be read", k.r.Lost)
		}
	case k.sys != nil:
		msgs, err = k.sys.Read()
		if k.sys.Lost > 0 {
			lost = fmt.Errorf("the kernel log (read through syslog(2)) wrapped %d times between two reads: records were lost", k.sys.Lost)
		}
	default:
		return k.err
	}
	s.Kmsg = msgs
	if err != nil {
		return err
	}
	if lost != nil {
		return partial{lost}
	}
	return nil
}

func (k *kmsgCollector) close() {
	if k.r != nil {
		k.r.Close()
	}
}
