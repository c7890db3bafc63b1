//go:build !linux

package layer

// roomy asks for a receive buffer of udpReadBuffer bytes (see the Linux
// version), as far as the system allows.
func roomy(c any) {
	if b, ok := c.(interface{ SetReadBuffer(int) error }); ok {
		b.SetReadBuffer(udpReadBuffer)
	}
}

// unread is what a stream's socket holds unread: not known here.
func unread(any) uint64 { return 0 }
