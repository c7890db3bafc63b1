package cpuprof

import "testing"

// TestModuleMeaning: a frame a stripped library leaves unnamed still
// says its role by the library; a named function's own meaning comes
// first, and the kernel or an unknown library says none.
func TestModuleMeaning(t *testing.T) {
	for _, tc := range []struct {
		fn, module string
		want       Kind
	}{
		{"[libcrypto.so.3]", "/usr/lib/x86_64-linux-gnu/libcrypto.so.3", TLS},
		{"SSL_do_handshake", "/usr/lib/x86_64-linux-gnu/libssl.so.3", TLS},
		{"[libz.so.1.2.13]", "/usr/lib/x86_64-linux-gnu/libz.so.1.2.13", Compression},
		{"[libbrotlienc.so.1.0.9]", "/usr/lib/x86_64-linux-gnu/libbrotlienc.so.1.0.9", Compression},
		{"[libpcre2-8.so.0.11.2]", "/usr/lib/x86_64-linux-gnu/libpcre2-8.so.0.11.2", Regex},
		{"memcpy", "/usr/lib/x86_64-linux-gnu/libcrypto.so.3", Copy},
		{"[libc.so.6]", "/usr/lib/x86_64-linux-gnu/libc.so.6", ""},
		{"tcp_sendmsg", KernelModule, ""},
	} {
		if got := meaningOf(tc.fn, tc.module); got != tc.want {
			t.Errorf("meaningOf(%q, %q) = %q, want %q", tc.fn, tc.module, got, tc.want)
		}
	}
}
