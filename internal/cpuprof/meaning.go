package cpuprof

import "strings"

// Kind is a kind of work netdoctor recognizes in a call chain.
type Kind string

// The kinds of work, each told by the functions that do it.
const (
	PortSearch  Kind = "port-search"
	LockSpin    Kind = "lock-spin"
	Checksum    Kind = "checksum"
	Copy        Kind = "copy"
	Conntrack   Kind = "conntrack"
	NetReceive  Kind = "network-receive"
	TCPConnect  Kind = "tcp-connect"
	PageFault   Kind = "page-fault"
	Scheduler   Kind = "scheduler"
	GC          Kind = "gc"
	TLS         Kind = "tls"
	Compression Kind = "compression"
	Regex       Kind = "regex"
	JSON        Kind = "json"
	UserLock    Kind = "user-lock"
)

// Describe says what a kind of work is, for a person.
func (k Kind) Describe() string {
	return describe[k]
}

var describe = map[Kind]string{
	PortSearch:  "searching for a free local port for connect(): each new outgoing connection walks the ports in use, and with many in TIME_WAIT the walk is long",
	LockSpin:    "spinning on a contended kernel lock",
	Checksum:    "computing packet checksums in software",
	Copy:        "copying data between the kernel and the process",
	Conntrack:   "connection tracking (netfilter)",
	NetReceive:  "receiving packets (softirq)",
	TCPConnect:  "setting up outgoing TCP connections",
	PageFault:   "page faults: mapping and zeroing memory",
	Scheduler:   "switching threads (the scheduler)",
	GC:          "Go's garbage collector",
	TLS:         "TLS: handshakes and encryption (libssl, libcrypto)",
	Compression: "compression (gzip, deflate, brotli): its cost is the compression level",
	Regex:       "regular expressions",
	JSON:        "JSON encoding and decoding",
	UserLock:    "waiting on a user-space lock while on CPU",
}

// meanings map functions to kinds: exact names first, then prefixes, in
// this order (the first match wins). The kernel's names are 6.x's.
var (
	exact = map[string]Kind{
		"inet_hash_connect": PortSearch, "__inet_hash_connect": PortSearch, "__inet_check_established": PortSearch,
		"inet6_hash_connect": PortSearch, "__inet6_check_established": PortSearch, "inet_bhash2_addr_any_conflict": PortSearch,
		"native_queued_spin_lock_slowpath": LockSpin, "queued_spin_lock_slowpath": LockSpin, "__pv_queued_spin_lock_slowpath": LockSpin,
		"_raw_spin_lock": LockSpin, "_raw_spin_lock_bh": LockSpin, "_raw_spin_lock_irqsave": LockSpin, "resilient_queued_spin_lock_slowpath": LockSpin,
		"csum_partial": Checksum, "csum_partial_copy_generic": Checksum, "do_csum": Checksum, "csum_partial_copy_nocheck": Checksum,
		"copy_user_enhanced_fast_string": Copy, "copy_user_generic_string": Copy, "copy_user_generic_unrolled": Copy, "rep_movs_alternative": Copy,
		"_copy_to_iter": Copy, "_copy_from_iter": Copy, "copy_page_to_iter": Copy, "copy_page_from_iter": Copy, "skb_copy_datagram_iter": Copy,
		"memcpy": Copy, "__memcpy": Copy, "memmove": Copy, "__memmove_avx_unaligned_erms": Copy, "__memcpy_avx_unaligned_erms": Copy, "runtime.memmove": Copy,
		"net_rx_action": NetReceive, "__napi_poll": NetReceive, "process_backlog": NetReceive, "__netif_receive_skb_core": NetReceive,
		"tcp_v4_connect": TCPConnect, "tcp_v6_connect": TCPConnect, "tcp_connect": TCPConnect,
		"handle_mm_fault": PageFault, "do_anonymous_page": PageFault, "clear_page_erms": PageFault, "asm_exc_page_fault": PageFault,
		"__schedule": Scheduler, "schedule": Scheduler, "finish_task_switch": Scheduler, "finish_task_switch.isra.0": Scheduler,
		"runtime.gcBgMarkWorker": GC, "runtime.scanobject": GC, "runtime.gcDrain": GC, "runtime.markroot": GC, "runtime.sweepone": GC,
		"pthread_mutex_lock": UserLock, "__lll_lock_wait": UserLock, "___pthread_mutex_lock": UserLock, "runtime.lock2": UserLock,
	}
	prefixes = []struct {
		prefix string
		kind   Kind
	}{
		{"nf_conntrack_", Conntrack}, {"__nf_conntrack_", Conntrack}, {"nf_ct_", Conntrack}, {"__nf_ct_", Conntrack},
		{"csum_", Checksum}, {"crc32c", Checksum},
		{"aesni_", TLS}, {"_aesni_", TLS}, {"aes_gcm_", TLS}, {"gcm_", TLS}, {"chacha20_", TLS}, {"ChaCha20_", TLS}, {"crypto/aes.", TLS},
		{"crypto/internal/fips140/aes", TLS}, {"crypto/tls.", TLS}, {"SSL_", TLS}, {"ssl3_", TLS}, {"tls1_", TLS}, {"EVP_", TLS},
		{"deflate", Compression}, {"inflate", Compression}, {"longest_match", Compression}, {"compress/flate.", Compression}, {"compress_block", Compression},
		{"pcre_", Regex}, {"pcre2_", Regex}, {"regexp.", Regex},
		{"encoding/json.", JSON},
		{"runtime.gcMark", GC}, {"runtime.gcBg", GC}, {"runtime.(*gcWork)", GC}, {"runtime.(*mspan).sweep", GC},
	}
)

// Meaning is what netdoctor knows function fn does, "" when nothing.
func Meaning(fn string) Kind {
	if k, ok := exact[fn]; ok {
		return k
	}
	for _, p := range prefixes {
		if strings.HasPrefix(fn, p.prefix) {
			return p.kind
		}
	}
	return ""
}

// modules are the roles of shared libraries whose hot code is named
// by the library alone: their hottest functions are often local ones
// (OpenSSL's assembler bignum and cipher routines) that neither .symtab,
// stripped by the distribution, nor .dynsym, exports only, name, so the
// frame reads "[libcrypto.so.3]"; the library says what the work is.
var modules = []struct {
	prefix string
	kind   Kind
}{
	{"libcrypto.so", TLS}, {"libssl.so", TLS}, {"libgnutls.so", TLS}, {"libnettle.so", TLS}, {"libhogweed.so", TLS},
	{"libz.so", Compression}, {"libbrotlienc.so", Compression}, {"libbrotlicommon.so", Compression}, {"libzstd.so", Compression},
	{"libpcre.so", Regex}, {"libpcre2-8.so", Regex}, {"libpcre2-16.so", Regex}, {"libpcre2-32.so", Regex},
}

// ModuleMeaning is the role of the shared library at path module (a
// mapping's file), "" when netdoctor knows none.
func ModuleMeaning(module string) Kind {
	base := baseName(module)
	for _, m := range modules {
		if strings.HasPrefix(base, m.prefix) {
			return m.kind
		}
	}
	return ""
}

// meaningOf is what a frame's function does, else its library's role.
func meaningOf(fn, module string) Kind {
	if k := Meaning(fn); k != "" {
		return k
	}
	return ModuleMeaning(module)
}
