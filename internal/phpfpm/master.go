package phpfpm

import (
	"path"
	"strings"
)

// titlePrefix is what fpm_env_setproctitle writes before every title
// (sapi/fpm/fpm/fpm_env.c, SETPROCTITLE_PREFIX).
const titlePrefix = "php-fpm: "

// ParseMaster returns the configuration file of a php-fpm master from its
// command line, as read from /proc/PID/cmdline. The master retitles itself
// "php-fpm: master process (/etc/php/8.2/fpm/php-fpm.conf)" and pads the
// rest of its argv area with NULs; before it does (or when something else
// launched it under its own argv) the argv form "php-fpm8.2 -y conf" is
// understood as well. ok is false for workers ("php-fpm: pool www"), for
// other programs, for a master started without -y (its path is the
// build's default, which the command line does not say) and for a title
// truncated to fit a short argv area, whose path would be wrong.
func ParseMaster(cmdline string) (confPath string, ok bool) {
	if title, ok := fpmTitle(cmdline); ok {
		rest, found := strings.CutPrefix(title, "master process (")
		if !found || !strings.HasSuffix(rest, ")") {
			return "", false
		}
		confPath = strings.TrimSuffix(rest, ")")
		return confPath, confPath != ""
	}
	return masterArgv(cmdline)
}

// ParseWorker returns the pool a php-fpm worker serves from its command
// line ("php-fpm: pool www"). ok is false for anything else.
func ParseWorker(cmdline string) (pool string, ok bool) {
	title, ok := fpmTitle(cmdline)
	if !ok {
		return "", false
	}
	pool, found := strings.CutPrefix(title, "pool ")
	if !found || pool == "" {
		return "", false
	}
	return pool, true
}

// fpmTitle returns the text after "php-fpm: " when cmdline is a title set by
// php-fpm. The title is one C string, so it ends at the first NUL; a
// cmdline whose words are NUL-separated (as a tool that splits and rejoins
// argv would produce) is joined with spaces first.
func fpmTitle(cmdline string) (string, bool) {
	s := strings.TrimLeft(cmdline, " \x00")
	if !strings.HasPrefix(strings.ReplaceAll(s, "\x00", " "), titlePrefix) {
		return "", false
	}
	first, _, _ := strings.Cut(s, "\x00")
	if !strings.HasPrefix(first, titlePrefix) {
		first = strings.ReplaceAll(strings.TrimRight(s, " \x00"), "\x00", " ")
	}
	return strings.TrimRight(strings.TrimPrefix(first, titlePrefix), " "), true
}

// masterArgv reads the argv form: a program named php-fpm* with -y,
// -yPATH, --fpm-config PATH or --fpm-config=PATH (php-fpm's own options,
// sapi/fpm/fpm/fpm_main.c).
func masterArgv(cmdline string) (string, bool) {
	args := strings.Split(strings.TrimRight(cmdline, "\x00"), "\x00")
	if len(args) < 2 || !strings.HasPrefix(path.Base(args[0]), "php-fpm") {
		return "", false
	}
	for i := 1; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-y" || a == "--fpm-config":
			if i+1 < len(args) && args[i+1] != "" {
				return args[i+1], true
			}
			return "", false
		case strings.HasPrefix(a, "--fpm-config="):
			v := strings.TrimPrefix(a, "--fpm-config=")
			return v, v != ""
		case strings.HasPrefix(a, "-y"):
			return a[2:], true
		}
	}
	return "", false
}
