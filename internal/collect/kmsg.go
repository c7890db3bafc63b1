package collect

import (
	"context"
	"fmt"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/kmsg"
)

// kmsgCollector returns the kernel log records written since New. The
// reader is opened once, before the first snapshot, and positioned at the
// end of the log, so older messages never count as evidence.
type kmsgCollector struct {
	r   *kmsg.Reader
	err error
}

func newKmsg() *kmsgCollector {
	r, err := kmsg.Open()
	return &kmsgCollector{r: r, err: err}
}

func (k *kmsgCollector) collect(_ context.Context, s *evidence.Snapshot) error {
	if k.r == nil {
		return k.err
	}
	msgs, err := k.r.Read()
	s.Kmsg = msgs
	if err != nil {
		return err
	}
	if k.r.Lost > 0 {
		return partial{fmt.Errorf("%d kernel log records were overwritten before they could be read", k.r.Lost)}
	}
	return nil
}

func (k *kmsgCollector) close() {
	if k.r != nil {
		k.r.Close()
	}
}
