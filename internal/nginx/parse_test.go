package nginx

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func parseFixture(t testing.TB, name string) *Config {
	t.Helper()
	c, err := Parse(readFixture(t, name))
	if err != nil {
		t.Fatalf("Parse(%s): %v", name, err)
	}
	return c
}

// outline prints a tree one directive a line, indented by depth, with
// the arguments quoted and the position shortened by trimming dir.
func outline(list []*Directive, dir string) []string {
	var out []string
	var walk func([]*Directive, string)
	walk = func(list []*Directive, indent string) {
		for _, d := range list {
			line := fmt.Sprintf("%s%s:%d %s", indent, strings.TrimPrefix(d.File, dir), d.Line, d.Name)
			for _, a := range d.Args {
				line += " " + strconv.Quote(a)
			}
			if d.Block != nil {
				line += " {"
			}
			out = append(out, line)
			walk(d.Block, indent+"  ")
		}
	}
	walk(list, "")
	return out
}

func TestParseOdd(t *testing.T) {
	c := parseFixture(t, "odd.dump")
	const dir = "/tmp/netdoctor-nginx-odd/"
	wantFiles := []string{dir + "nginx.conf", dir + "conf.d/.hidden.conf", dir + "./conf.d/crlf.conf", dir + "./conf.d/empty.conf"}
	if diff := cmp.Diff(wantFiles, c.Files); diff != "" {
		t.Errorf("Files mismatch (-want +got):\n%s", diff)
	}
	want := []string{
		// The explicit include of a hidden file expands; "./conf.d/*"
		// below does not match it, as glob(3) does not.
		`conf.d/.hidden.conf:1 worker_processes "2"`,
		`nginx.conf:2 events {`,
		`nginx.conf:3 http {`,
		`  ./conf.d/crlf.conf:1 server {`,
		`    ./conf.d/crlf.conf:2 listen "18091"`,
		`    ./conf.d/crlf.conf:3 server_name "crlf.example.com"`,
		`    ./conf.d/crlf.conf:4 tcp_nodelay "off"`,
		`    ./conf.d/crlf.conf:5 location "/" {`,
		`      ./conf.d/crlf.conf:5 proxy_pass "http://127.0.0.1:9200"`,
		`  nginx.conf:3 log_format "odd" "$remote_addr \"$request\" " "\t$status"`,
		`  nginx.conf:6 access_log "logs/odd.log" "odd"`,
		`  nginx.conf:6 map "$uri" "$odd_re" {`,
		`    nginx.conf:6 ~^/a{2,3}$ "1"`,
		`    nginx.conf:6 default "0"`,
		`  nginx.conf:7 server {`,
		`    nginx.conf:7 listen "127.0.0.1:18090" "backlog=64"`,
		`    nginx.conf:7 server_name "odd.example.com" "x.example.com"`,
		`    nginx.conf:7 location "=" "/a b" {`,
		`      nginx.conf:7 return "200" "it's \"quoted\" {not a block} # not a comment"`,
		`    nginx.conf:7 location "/v" {`,
		`      nginx.conf:7 set "$a" "x"`,
		`      nginx.conf:7 add_header "X-Hash" "a#b"`,
		`      nginx.conf:7 return "200" "${a}b"`,
		`    nginx.conf:7 location "/if" {`,
		`      nginx.conf:7 if "($request_uri" "=" "/if" ")" {`,
		`        nginx.conf:7 return "404"`,
		`      nginx.conf:7 proxy_pass "http://odd_backend"`,
		`  nginx.conf:8 upstream "odd_backend" {`,
		`    nginx.conf:8 server "127.0.0.1:9300"`,
		`    nginx.conf:8 keepalive "2"`,
	}
	if diff := cmp.Diff(want, outline(c.Directives, dir)); diff != "" {
		t.Errorf("odd.dump tree mismatch (-want +got):\n%s", diff)
	}
}

func TestParseDebian(t *testing.T) {
	// Captured with nginx -T 2>&1, so "syntax is ok" comes first.
	c := parseFixture(t, "debian.dump")
	wantFiles := []string{"/etc/nginx/nginx.conf", "/etc/nginx/mime.types", "/etc/nginx/sites-enabled/default"}
	if diff := cmp.Diff(wantFiles, c.Files); diff != "" {
		t.Errorf("Files mismatch (-want +got):\n%s", diff)
	}
	var got []string
	for _, d := range c.Find("http", "server", "listen") {
		got = append(got, fmt.Sprintf("%s %s", d.Pos(), strings.Join(d.Args, " ")))
	}
	want := []string{
		"/etc/nginx/sites-enabled/default:22 80 default_server",
		"/etc/nginx/sites-enabled/default:23 [::]:80 default_server",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listens mismatch (-want +got):\n%s", diff)
	}
	// mime.types' types block takes the place of its include, between
	// types_hash_max_size and default_type.
	var names []string
	for _, d := range c.Find("http")[0].Block[:6] {
		names = append(names, d.Name+"@"+d.Pos().String())
	}
	wantNames := []string{
		"sendfile@/etc/nginx/nginx.conf:18", "tcp_nopush@/etc/nginx/nginx.conf:19",
		"types_hash_max_size@/etc/nginx/nginx.conf:20", "types@/etc/nginx/mime.types:2",
		"default_type@/etc/nginx/nginx.conf:27", "ssl_protocols@/etc/nginx/nginx.conf:33",
	}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("http block start mismatch (-want +got):\n%s", diff)
	}
	if n := len(c.Find("http", "types")[0].Block); n != 86 {
		t.Errorf("types block has %d entries, want mime.types' 86", n)
	}
}

func TestParseTruncated(t *testing.T) {
	c, err := Parse(readFixture(t, "app-truncated.dump"))
	if !errors.Is(err, ErrPartial) {
		t.Fatalf("Parse(app-truncated.dump) error = %v, want ErrPartial", err)
	}
	const php = "/tmp/netdoctor-nginx-app/conf.d/php.conf"
	if want := php + ":12: unexpected end of file"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	// Everything before the cut is there, down to the last directive of
	// the block the dump stops in.
	servers := c.Find("http", "server")
	if len(servers) != 2 {
		t.Fatalf("%d http servers, want api.conf's and php.conf's", len(servers))
	}
	loc := servers[1].Block[len(servers[1].Block)-1]
	last := loc.Block[len(loc.Block)-1]
	if got := fmt.Sprintf("%s %s %v", last.Pos(), last.Name, last.Args); got != php+":11 fastcgi_pass [php]" {
		t.Errorf("last directive = %s, want php.conf:11's fastcgi_pass", got)
	}
	if n := len(c.Find("http", "upstream")); n != 3 {
		t.Errorf("%d upstreams, want 3", n)
	}
}

func TestParseApp(t *testing.T) {
	c := parseFixture(t, "app.dump")
	// snippets/fastcgi.conf is dumped once but included twice.
	params := c.Find("http", "server", "location", "fastcgi_param")
	if len(params) != 6 {
		t.Fatalf("%d fastcgi_param, want 3 in each of two locations", len(params))
	}
	if got := params[3].Pos().String(); got != "/tmp/netdoctor-nginx-app/snippets/fastcgi.conf:1" {
		t.Errorf("second location's first fastcgi_param at %s, want snippets/fastcgi.conf:1", got)
	}
	// conf.d/*.conf, relative to the main file's directory, expands in
	// sorted order although the dump has snippets/ between its files.
	var servers []string
	for _, s := range c.Find("http", "server") {
		servers = append(servers, s.Pos().String())
	}
	want := []string{
		"/tmp/netdoctor-nginx-app/conf.d/api.conf:1",
		"/tmp/netdoctor-nginx-app/conf.d/php.conf:1",
		"/tmp/netdoctor-nginx-app/conf.d/zz-inherit.conf:1",
		"/tmp/netdoctor-nginx-app/conf.d/zz-inherit.conf:24",
	}
	if diff := cmp.Diff(want, servers); diff != "" {
		t.Errorf("servers mismatch (-want +got):\n%s", diff)
	}
}

func TestScanner(t *testing.T) {
	tests := []struct {
		in   string
		want []string // one statement a line: its line, words and end
	}{
		{"a b;", []string{`1 ["a" "b"] ;`}},
		{"a\n  b\n  c;", []string{`1 ["a" "b" "c"] ;`}},
		{"# only a comment\n\n  a;", []string{`3 ["a"] ;`}},
		{`a "b c" 'd\'e' f\ g "h\"i" j\k;`, []string{`1 ["a" "b c" "d'e" "f\\ g" "h\"i" "j\\k"] ;`}},
		{`a "\t\r\n\\";`, []string{`1 ["a" "\t\r\n\\"] ;`}},
		{"a#b c; # d;", []string{`1 ["a#b" "c"] ;`}},
		{"a ${b}c {}", []string{`1 ["a" "${b}c"] {`, `1 [] }`}},
		{"a b}c;", []string{`1 ["a" "b}c"] ;`}},
		{"a{b;}", []string{`1 ["a"] {`, `1 ["b"] ;`, `1 [] }`}},
		{`if ($a = "b") {}`, []string{`1 ["if" "($a" "=" "b" ")"] {`, `1 [] }`}},
		{`a "x"{`, []string{`1 ["a" "x"] {`}},
		{"a '' \"\";", []string{`1 ["a" "" ""] ;`}},
		{"a\r\nb;\r\n", []string{`1 ["a" "b"] ;`}},
	}
	for _, tt := range tests {
		s := newScanner([]byte(tt.in))
		var got []string
		for {
			st, err := s.next()
			if err != nil {
				t.Fatalf("scan %q: line %d: %s", tt.in, err.line, err.msg)
			}
			if st.end == endFile {
				break
			}
			ends := map[stmtEnd]string{endSemicolon: ";", endBlock: "{", endClose: "}"}
			got = append(got, fmt.Sprintf("%d %s %s", st.line, quoteAll(st.words), ends[st.end]))
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("scan %q mismatch (-want +got):\n%s", tt.in, diff)
		}
	}
}

func quoteAll(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = strconv.Quote(w)
	}
	return "[" + strings.Join(q, " ") + "]"
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, dump, wantErr string
		wantTree            []string
	}{
		{
			name:     "text after a quote",
			dump:     "# configuration file /n.conf:\na;\nb \"c\"d;\n",
			wantErr:  `/n.conf:2: unexpected 'd'`,
			wantTree: []string{`/n.conf:1 a`},
		},
		{
			name:     "unclosed block",
			dump:     "# configuration file /n.conf:\nhttp {\n  a;\n",
			wantErr:  `/n.conf:2: unexpected end of file, expecting "}"`,
			wantTree: []string{`/n.conf:1 http {`, `  /n.conf:2 a`},
		},
		{
			name:     "unclosed quote",
			dump:     "# configuration file /n.conf:\na \"b;\n",
			wantErr:  `/n.conf:1: unexpected end of file, expecting ";" or "}"`,
			wantTree: nil,
		},
		{
			name:     "close without open",
			dump:     "# configuration file /n.conf:\na;\n}\nb;\n",
			wantErr:  `/n.conf:2: unexpected "}"`,
			wantTree: []string{`/n.conf:1 a`},
		},
		{
			name:     "include not dumped",
			dump:     "# configuration file /etc/n.conf:\ninclude b.conf;\ninclude c/*.conf;\n",
			wantErr:  `/etc/n.conf:1: include b.conf: no such file in the dump`,
			wantTree: nil,
		},
		{
			name:     "include of itself",
			dump:     "# configuration file /n.conf:\na;\ninclude /n.conf;\n",
			wantErr:  `includes nested deeper than 32`,
			wantTree: repeat(`/n.conf:1 a`, maxIncludeDepth+1),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse([]byte(tt.dump))
			if !errors.Is(err, ErrPartial) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse error = %v, want ErrPartial with %q", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantTree, outline(c.Directives, "")); diff != "" {
				t.Errorf("tree mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func repeat(s string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestParseIncludeBomb(t *testing.T) {
	// Each file includes the next one ten times: 10^8 copies unbounded.
	var b strings.Builder
	for i := range 8 {
		fmt.Fprintf(&b, "# configuration file /f%d:\n", i)
		for range 10 {
			fmt.Fprintf(&b, "include /f%d; a;\n", i+1)
		}
	}
	b.WriteString("# configuration file /f8:\nx;\n")
	c, err := Parse([]byte(b.String()))
	if !errors.Is(err, ErrPartial) || !strings.Contains(err.Error(), "includes expand to more than") {
		t.Fatalf("Parse error = %v, want the expansion limit", err)
	}
	if n := len(c.Directives); n == 0 || n > maxDirectives {
		t.Errorf("%d directives, want some and at most %d", n, maxDirectives)
	}
}

func TestParseNotDump(t *testing.T) {
	for _, in := range []string{"", "events {}\n", "# configuration file :\n", "nginx: [emerg] unknown directive\n"} {
		if c, err := Parse([]byte(in)); !errors.Is(err, ErrNotDump) || c != nil {
			t.Errorf("Parse(%q) = %v, %v; want nil, ErrNotDump", in, c, err)
		}
	}
}

func TestSplitDump(t *testing.T) {
	dump := "nginx: the configuration file /a syntax is ok\n" +
		"# configuration file /a:\nx;\n\n" + // a ends with an empty line
		"# configuration file /b:\n\n" + // b is empty
		"# configuration file /c:\ny;" + "\n" // c has no final newline
	var got []string
	for _, f := range splitDump([]byte(dump)) {
		got = append(got, fmt.Sprintf("%s=%q", f.name, f.text))
	}
	want := []string{`/a="x;\n"`, `/b=""`, `/c="y;"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("splitDump mismatch (-want +got):\n%s", diff)
	}
}

func TestAddGlobals(t *testing.T) {
	c := parseFixture(t, "app.dump")
	if err := c.AddGlobals("daemon off; master_process on;"); err != nil {
		t.Fatal(err)
	}
	got := outline(c.Directives[:3], "")
	want := []string{`-g:0 daemon "off"`, `-g:0 master_process "on"`, `/tmp/netdoctor-nginx-app/nginx.conf:3 worker_processes "4"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AddGlobals mismatch (-want +got):\n%s", diff)
	}
	if got := c.Directives[0].Pos().String(); got != "nginx -g" {
		t.Errorf("Pos of a -g directive = %q, want %q", got, "nginx -g")
	}
	if err := c.AddGlobals("daemon off"); !errors.Is(err, ErrPartial) {
		t.Errorf("AddGlobals without ';' error = %v, want ErrPartial", err)
	}
}
