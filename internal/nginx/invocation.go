package nginx

import (
	"strings"
)

// Invocation is how an nginx master was started: the options from its
// command line that decide which configuration it read and where its
// relative paths lead.
type Invocation struct {
	// Binary is the program as the master's title names it, which is
	// argv[0] as written: "/usr/sbin/nginx", or just "nginx" when it was
	// found through $PATH. Prefer /proc/PID/exe to run it.
	Binary string
	// Conf is the -c value, "" when nginx used its compiled-in path.
	Conf string
	// Prefix is the -p value, "" when nginx used its compiled-in prefix.
	Prefix string
	// Globals is the -g value: directives that nginx parses before the
	// configuration file, such as "daemon off;".
	Globals string
	// ErrorLog is the -e value, which replaces the compiled-in error log
	// (1.19.5+); "stderr" means the standard error.
	ErrorLog string
	// Dir is the directory relative -c and -p values are resolved
	// against: the master's working directory, /proc/PID/cwd. The title
	// does not hold it, so ParseMaster leaves it empty for the caller to
	// fill in; empty means the caller's own working directory.
	Dir string
}

const masterTitle = "nginx: master process "

// ParseMaster reads an nginx master's command line, /proc/PID/cmdline.
// nginx overwrites its argv with a title of its own, which joins the
// original arguments with spaces:
//
//	nginx: master process /usr/sbin/nginx -c /etc/nginx/nginx.conf -g daemon off;
//
// and pads it with NULs. Arguments separated by NULs are accepted too.
// ok is false for anything but a master's title: a worker ("nginx: worker
// process"), a cache manager, or another program.
//
// Joining loses the boundaries between arguments, so a -g value, which
// holds spaces, runs to the end of the title, or up to the next nginx
// option after one of its directives ends with ";". Other values cannot
// contain spaces.
func ParseMaster(cmdline string) (inv Invocation, ok bool) {
	parts := strings.Split(strings.TrimRight(cmdline, "\x00"), "\x00")
	title, found := strings.CutPrefix(parts[0], masterTitle)
	if !found {
		return Invocation{}, false
	}
	args := splitTitle(title)
	// Anything after a NUL inside the title kept its argument boundaries,
	// which are then exact.
	for _, p := range parts[1:] {
		if p != "" {
			args = append(args, p)
		}
	}
	if len(args) == 0 {
		return Invocation{}, false
	}
	inv.Binary = args[0]
	parseOptions(&inv, args[1:])
	return inv, true
}

// splitTitle splits a space-joined command line back into arguments,
// keeping a -g value whole.
func splitTitle(title string) []string {
	words := strings.Fields(title)
	var args []string
	for i := 0; i < len(words); i++ {
		w := words[i]
		if !strings.HasPrefix(w, "-g") {
			args = append(args, w)
			continue
		}
		var value []string
		if w != "-g" {
			value = append(value, w[2:]) // "-gdaemon off;" is accepted too
		} else if i+1 < len(words) {
			i++
			value = append(value, words[i])
		}
		for i+1 < len(words) && !(strings.HasSuffix(value[len(value)-1], ";") && isOption(words[i+1])) {
			i++
			value = append(value, words[i])
		}
		args = append(args, "-g")
		if len(value) > 0 {
			args = append(args, strings.Join(value, " "))
		}
	}
	return args
}

// isOption reports whether w is one of the options nginx accepts, so that
// it ends a -g value.
func isOption(w string) bool {
	if len(w) < 2 || w[0] != '-' {
		return false
	}
	return strings.IndexByte("?hvVtTqpecgs", w[1]) >= 0
}

// parseOptions reads options the way ngx_get_options does: several flags
// may share one argument ("-tq"), and an option that takes a value takes
// the rest of its argument or, when that is empty, the next argument.
func parseOptions(inv *Invocation, args []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			continue // nginx would have refused to start; skip rather than guess
		}
		for k := 1; k < len(a); k++ {
			var dst *string
			switch a[k] {
			case 'c':
				dst = &inv.Conf
			case 'p':
				dst = &inv.Prefix
			case 'g':
				dst = &inv.Globals
			case 'e':
				dst = &inv.ErrorLog
			default:
				continue
			}
			if rest := a[k+1:]; rest != "" {
				*dst = rest
			} else if i+1 < len(args) {
				i++
				*dst = args[i]
			}
			break
		}
	}
}
