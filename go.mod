module github.com/netdoctor/netdoctor

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.49.0
)

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0 // indirect
	github.com/aymanbagabas/go-udiff v0.4.1 // indirect
)
