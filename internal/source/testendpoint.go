package source

import "net"

// TestEndpoint is the address of the agent's layer-test endpoint as this
// host reaches it: the agent URL's host with the endpoint's port (the
// agent may listen on all addresses); "" when the agent offers none.
func (r *Remote) TestEndpoint() string {
	if r.info.TestEndpoint == "" {
		return ""
	}
	_, port, err := net.SplitHostPort(r.info.TestEndpoint)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(r.base.Hostname(), port)
}

// Token is the bearer token the agent was reached with: its test
// endpoint takes the same.
func (r *Remote) Token() []byte { return []byte(r.token) }
