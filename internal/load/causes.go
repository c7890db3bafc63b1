package load

import (
	"errors"
	"syscall"
)

// connectCause names why a connection failed; "no-local-port" and
// "fd-limit" mean the load generator's own host is the limit.
func connectCause(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return "no-local-port"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "fd-limit"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "unreachable"
	case errors.Is(err, syscall.ETIMEDOUT):
		return "connect-timeout"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset"
	}
	return err.Error()
}
