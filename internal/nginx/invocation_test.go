package nginx

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseMaster(t *testing.T) {
	pad := strings.Repeat("\x00", 40) // nginx pads the title over its old argv and environ
	tests := []struct {
		name    string
		cmdline string
		want    Invocation
		wantOK  bool
	}{
		{
			name:    "all options, padded",
			cmdline: "nginx: master process /usr/sbin/nginx -c /tmp/x/nginx.conf -p /tmp/x/ -g daemon off;" + pad,
			want:    Invocation{Binary: "/usr/sbin/nginx", Conf: "/tmp/x/nginx.conf", Prefix: "/tmp/x/", Globals: "daemon off;"},
			wantOK:  true,
		},
		{
			name:    "debian systemd unit",
			cmdline: "nginx: master process /usr/sbin/nginx -g daemon on; master_process on;\x00",
			want:    Invocation{Binary: "/usr/sbin/nginx", Globals: "daemon on; master_process on;"},
			wantOK:  true,
		},
		{
			name:    "no options, no NUL",
			cmdline: "nginx: master process nginx",
			want:    Invocation{Binary: "nginx"},
			wantOK:  true,
		},
		{
			name:    "-g before -c ends at the option after a semicolon",
			cmdline: "nginx: master process /opt/nginx/sbin/nginx -g worker_processes 2; daemon off; -c /opt/nginx/conf/a.conf" + pad,
			want:    Invocation{Binary: "/opt/nginx/sbin/nginx", Conf: "/opt/nginx/conf/a.conf", Globals: "worker_processes 2; daemon off;"},
			wantOK:  true,
		},
		{
			name:    "-g with a dash inside its value",
			cmdline: "nginx: master process nginx -g env A=-c; daemon off;",
			want:    Invocation{Binary: "nginx", Globals: "env A=-c; daemon off;"},
			wantOK:  true,
		},
		{
			name:    "values attached to their options",
			cmdline: "nginx: master process /usr/local/nginx/sbin/nginx -c/etc/a.conf -p/opt/ -gdaemon off;" + pad,
			want:    Invocation{Binary: "/usr/local/nginx/sbin/nginx", Conf: "/etc/a.conf", Prefix: "/opt/", Globals: "daemon off;"},
			wantOK:  true,
		},
		{
			name:    "-e and a flag cluster",
			cmdline: "nginx: master process nginx -q -e stderr -p /srv/",
			want:    Invocation{Binary: "nginx", Prefix: "/srv/", ErrorLog: "stderr"},
			wantOK:  true,
		},
		{
			name:    "NUL-separated arguments keep their spaces",
			cmdline: "nginx: master process /usr/sbin/nginx\x00-c\x00/etc/nginx/nginx.conf\x00-g\x00daemon off; pid /run/a.pid;\x00",
			want:    Invocation{Binary: "/usr/sbin/nginx", Conf: "/etc/nginx/nginx.conf", Globals: "daemon off; pid /run/a.pid;"},
			wantOK:  true,
		},
		{
			name:    "-g value after a NUL",
			cmdline: "nginx: master process /usr/sbin/nginx -g\x00daemon off;\x00",
			want:    Invocation{Binary: "/usr/sbin/nginx", Globals: "daemon off;"},
			wantOK:  true,
		},
		{name: "worker", cmdline: "nginx: worker process" + pad},
		{name: "worker shutting down", cmdline: "nginx: worker process is shutting down" + pad},
		{name: "cache manager", cmdline: "nginx: cache manager process" + pad},
		{name: "title without binary", cmdline: "nginx: master process " + pad},
		{name: "not rewritten", cmdline: "/usr/sbin/nginx\x00-g\x00daemon off;\x00"},
		{name: "another program", cmdline: "/usr/sbin/apache2\x00-k\x00start\x00"},
		{name: "empty", cmdline: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseMaster(tt.cmdline)
			if ok != tt.wantOK {
				t.Fatalf("ParseMaster(%q) ok = %v, want %v", tt.cmdline, ok, tt.wantOK)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseMaster(%q) mismatch (-want +got):\n%s", tt.cmdline, diff)
			}
		})
	}
}
