package dropmon

// The BPF programs are compiled ahead and committed (dropmon_bpfel.o and
// its Go binding): building netdoctor needs only Go. After a change to
// bpf/dropmon.c, regenerate both with clang 14 or later and libbpf's
// headers (Debian: apt-get install clang libbpf-dev):
//
//	go generate ./internal/dropmon
//
//go:generate go tool -modfile=../../tools/go.mod bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -target bpfel -tags linux -type drop_key -type drop_val -type ledger_key -type ledger_val -type flow_key -type flow_val dropmon bpf/dropmon.c -- -I/usr/include/x86_64-linux-gnu
