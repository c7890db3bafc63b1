package lab

import _ "embed"

// The lab's Python servers: services written in neither nginx nor PHP,
// which netdoctor must diagnose without knowing them. They are plain
// scripts with the standard library only, written into the lab's
// directory and run by Debian's python3 (StartPython).
var (
	// poolPy serves with a fixed pool of worker threads, each request
	// spending a set time off the CPU (python-pool).
	//go:embed servers/pool.py
	poolPy []byte
	// lookupPy resolves its backend's name on every request, one thread
	// per connection (python-dns).
	//go:embed servers/lookup.py
	lookupPy []byte
)
