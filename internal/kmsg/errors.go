package kmsg

import "errors"

// ErrUnavailable is wrapped by errors from Open when /dev/kmsg is missing
// or the caller lacks the permission to read it. Collectors report it as
// the "unavailable" state rather than as a failure.
var ErrUnavailable = errors.New("unavailable")

// ErrNotSupported is wrapped by errors from Open on platforms without
// /dev/kmsg.
var ErrNotSupported = errors.New("not supported")
