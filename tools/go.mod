module github.com/netdoctor/netdoctor/tools

go 1.26.0

tool (
	github.com/cilium/ebpf/cmd/bpf2go
	github.com/polyfloyd/go-errorlint
	github.com/tetafro/godot/cmd/godot
	honnef.co/go/tools/cmd/staticcheck
)

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/polyfloyd/go-errorlint v1.8.0 // indirect
	github.com/tetafro/godot v1.5.6 // indirect
	go.yaml.in/yaml/v3 v3.0.4 // indirect
	golang.org/x/exp/typeparams v0.0.0-20260209203927-2842357ff358 // indirect
	golang.org/x/mod v0.41.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/tools v0.51.0 // indirect
	honnef.co/go/tools v0.8.2 // indirect
)
