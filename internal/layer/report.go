package layer

// Report is a layer test as `load tcp://` and `load udp://` write it:
// the TCP directions in the order they ran, or the UDP test.
type Report struct {
	Target string       `json:"target"` // tcp://HOST:PORT or udp://HOST:PORT
	TCP    []*TCPResult `json:"tcp,omitempty"`
	UDP    *UDPResult   `json:"udp,omitempty"`
}
