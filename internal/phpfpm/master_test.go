package phpfpm

import "testing"

func TestParseMaster(t *testing.T) {
	pad := "\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
	tests := []struct {
		cmdline string
		want    string
		wantOK  bool
	}{
		// As read from /proc/PID/cmdline of php-fpm8.2 -F -y ... -p ...
		{cmdline: "php-fpm: master process (/tmp/fpmx/php-fpm.conf)" + pad, want: "/tmp/fpmx/php-fpm.conf", wantOK: true},
		{cmdline: "php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)", want: "/etc/php/8.2/fpm/php-fpm.conf", wantOK: true},
		{cmdline: "php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)      ", want: "/etc/php/8.2/fpm/php-fpm.conf", wantOK: true},
		{cmdline: "php-fpm: master process (/srv/my conf (v2)/fpm.conf)\x00", want: "/srv/my conf (v2)/fpm.conf", wantOK: true},
		{cmdline: "php-fpm:\x00master\x00process\x00(/etc/fpm.conf)\x00", want: "/etc/fpm.conf", wantOK: true},
		// The title is a C string: whatever the kernel shows after its NUL
		// (the environment, when the title filled the argv area) is not part of it.
		{cmdline: "php-fpm: master process (/etc/fpm.conf)\x00PATH=/usr/bin)", want: "/etc/fpm.conf", wantOK: true},
		{cmdline: "php-fpm: master process (/etc/php/8.2/fpm/php-f" + pad, wantOK: false},
		{cmdline: "php-fpm: master process ()", wantOK: false},
		{cmdline: "php-fpm: pool www" + pad, wantOK: false},
		{cmdline: "/usr/sbin/php-fpm8.2\x00--nodaemonize\x00--fpm-config\x00/etc/php/8.2/fpm/php-fpm.conf\x00", want: "/etc/php/8.2/fpm/php-fpm.conf", wantOK: true},
		{cmdline: "php-fpm\x00-F\x00-y\x00conf/fpm.conf\x00", want: "conf/fpm.conf", wantOK: true},
		{cmdline: "php-fpm82\x00-y/etc/fpm.conf\x00", want: "/etc/fpm.conf", wantOK: true},
		{cmdline: "php-fpm\x00--fpm-config=/etc/fpm.conf", want: "/etc/fpm.conf", wantOK: true},
		{cmdline: "php-fpm\x00-y\x00", wantOK: false},
		{cmdline: "/usr/sbin/php-fpm8.2\x00--nodaemonize\x00", wantOK: false},
		{cmdline: "nginx: master process /usr/sbin/nginx -g daemon on;", wantOK: false},
		{cmdline: "/usr/bin/vim\x00-y\x00/etc/fpm.conf\x00", wantOK: false},
		{cmdline: "", wantOK: false},
		{cmdline: "\x00\x00", wantOK: false},
	}
	for _, tt := range tests {
		got, ok := ParseMaster(tt.cmdline)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseMaster(%q) = %q, %v; want %q, %v", tt.cmdline, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestParseWorker(t *testing.T) {
	tests := []struct {
		cmdline string
		want    string
		wantOK  bool
	}{
		{cmdline: "php-fpm: pool www\x00\x00\x00\x00", want: "www", wantOK: true},
		{cmdline: "php-fpm: pool my_app   ", want: "my_app", wantOK: true},
		{cmdline: "php-fpm: pool ", wantOK: false},
		{cmdline: "php-fpm: master process (/etc/fpm.conf)", wantOK: false},
		{cmdline: "/usr/sbin/php-fpm8.2\x00-F\x00", wantOK: false},
	}
	for _, tt := range tests {
		got, ok := ParseWorker(tt.cmdline)
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("ParseWorker(%q) = %q, %v; want %q, %v", tt.cmdline, got, ok, tt.want, tt.wantOK)
		}
	}
}
