//go:build !linux

package layer

import "net"

// tcpInfo is Linux's TCP_INFO: elsewhere there is none, and throughput
// is counted from the bytes written.
func tcpInfo(net.Conn) (StreamInfo, bool) { return StreamInfo{}, false }
