package phpfpm

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// setter returns how a [global] key is stored, or nil for a key netdoctor
// does not model. The keys and their parsers are php-fpm 8.2's
// ini_fpm_global_options.
func (g *Global) setter(key string) func(Directive) error {
	switch key {
	case "pid":
		return stringSetter(&g.PIDFile, "")
	case "error_log":
		return stringSetter(&g.ErrorLog, "")
	case "log_level":
		return logLevelSetter(&g.LogLevel)
	case "emergency_restart_threshold":
		return intSetter(&g.EmergencyRestartThreshold)
	case "emergency_restart_interval":
		return timeSetter(&g.EmergencyRestartInterval)
	case "process_control_timeout":
		return timeSetter(&g.ProcessControlTimeout)
	case "process.max":
		return intSetter(&g.ProcessMax)
	case "rlimit_files":
		return intSetter(&g.RlimitFiles)
	case "rlimit_core":
		return rlimitCoreSetter(&g.RlimitCore)
	}
	return nil
}

// setter is Global.setter for a pool (ini_fpm_pool_options).
func (p *Pool) setter(key string) func(Directive) error {
	switch key {
	case "prefix":
		return stringSetter(&p.Prefix, p.Name)
	case "user":
		return stringSetter(&p.User, p.Name)
	case "group":
		return stringSetter(&p.Group, p.Name)
	case "listen":
		return stringSetter(&p.listen, p.Name)
	case "listen.backlog":
		return intSetter(&p.ListenBacklog)
	case "listen.allowed_clients":
		return stringSetter(&p.ListenAllowedClients, p.Name)
	case "pm":
		return pmSetter(&p.PM)
	case "pm.max_children":
		return intSetter(&p.MaxChildren)
	case "pm.start_servers":
		return intSetter(&p.StartServers)
	case "pm.min_spare_servers":
		return intSetter(&p.MinSpareServers)
	case "pm.max_spare_servers":
		return intSetter(&p.MaxSpareServers)
	case "pm.max_spawn_rate":
		return intSetter(&p.MaxSpawnRate)
	case "pm.process_idle_timeout":
		return timeSetter(&p.ProcessIdleTimeout)
	case "pm.max_requests":
		return intSetter(&p.MaxRequests)
	}
	return p.moreSetter(key)
}

func (p *Pool) moreSetter(key string) func(Directive) error {
	switch key {
	case "pm.status_path":
		return stringSetter(&p.StatusPath, p.Name)
	case "pm.status_listen":
		return stringSetter(&p.statusListen, p.Name)
	case "ping.path":
		return stringSetter(&p.PingPath, p.Name)
	case "request_terminate_timeout":
		return timeSetter(&p.RequestTerminateTimeout)
	case "request_slowlog_timeout":
		return timeSetter(&p.RequestSlowlogTimeout)
	case "slowlog":
		return stringSetter(&p.Slowlog, p.Name)
	case "access.log":
		return stringSetter(&p.AccessLog, p.Name)
	case "catch_workers_output":
		return boolSetter(&p.CatchWorkersOutput)
	case "rlimit_files":
		return intSetter(&p.RlimitFiles)
	}
	return nil
}

// stringSetter expands $pool as fpm_conf_set_string does; outside a pool
// php-fpm rejects the line, so the value is kept as written.
func stringSetter(dst *Setting[string], pool string) func(Directive) error {
	return func(d Directive) error {
		v := d.Value
		var err error
		if strings.Contains(v, "$pool") {
			if pool == "" {
				err = errors.New("$pool used outside a pool section")
			} else {
				v = strings.ReplaceAll(v, "$pool", pool)
			}
		}
		*dst = Setting[string]{Value: v, File: d.File, Line: d.Line}
		return err
	}
}

// intSetter follows fpm_conf_set_integer: an optional leading '-', then
// digits only; the empty string is 0.
func intSetter(dst *Setting[int]) func(Directive) error {
	return func(d Directive) error {
		for i, c := range []byte(d.Value) {
			if (c < '0' || c > '9') && (i != 0 || c != '-') {
				return fmt.Errorf("%q is not a number", d.Value)
			}
		}
		*dst = Setting[int]{Value: cAtoi(d.Value), File: d.File, Line: d.Line}
		return nil
	}
}

// timeSetter follows fpm_conf_set_time: seconds, or a number with an s, m,
// h or d suffix, read with atoi.
func timeSetter(dst *Setting[time.Duration]) func(Directive) error {
	return func(d Directive) error {
		v := d.Value
		if v == "" {
			return errors.New("empty time value")
		}
		unit := time.Second
		switch v[len(v)-1] {
		case 's':
			v = v[:len(v)-1]
		case 'm':
			unit, v = time.Minute, v[:len(v)-1]
		case 'h':
			unit, v = time.Hour, v[:len(v)-1]
		case 'd':
			unit, v = 24*time.Hour, v[:len(v)-1]
		default:
			if c := v[len(v)-1]; c < '0' || c > '9' {
				return fmt.Errorf("unknown suffix in time value %q", d.Value)
			}
		}
		*dst = Setting[time.Duration]{Value: time.Duration(cAtoi(v)) * unit, File: d.File, Line: d.Line}
		return nil
	}
}

// boolSetter accepts what fpm_conf_set_boolean accepts after the INI
// scanner turned yes/on/true into "1" and no/off/false/none into "".
func boolSetter(dst *Setting[bool]) func(Directive) error {
	return func(d Directive) error {
		switch d.Value {
		case "1":
			*dst = Setting[bool]{Value: true, File: d.File, Line: d.Line}
		case "":
			*dst = Setting[bool]{Value: false, File: d.File, Line: d.Line}
		default:
			return fmt.Errorf("invalid boolean %q", d.Value)
		}
		return nil
	}
}

func pmSetter(dst *Setting[string]) func(Directive) error {
	return func(d Directive) error {
		v := strings.ToLower(d.Value)
		switch v {
		case "static", "dynamic", "ondemand":
			*dst = Setting[string]{Value: v, File: d.File, Line: d.Line}
			return nil
		}
		return fmt.Errorf("invalid process manager %q (static, dynamic or ondemand)", d.Value)
	}
}

func logLevelSetter(dst *Setting[string]) func(Directive) error {
	return func(d Directive) error {
		v := strings.ToLower(d.Value)
		switch v {
		case "warn":
			v = "warning"
		case "debug", "notice", "warning", "error", "alert":
		default:
			return fmt.Errorf("invalid log level %q", d.Value)
		}
		*dst = Setting[string]{Value: v, File: d.File, Line: d.Line}
		return nil
	}
}

func rlimitCoreSetter(dst *Setting[int]) func(Directive) error {
	return func(d Directive) error {
		if strings.EqualFold(d.Value, "unlimited") {
			*dst = Setting[int]{Value: -1, File: d.File, Line: d.Line}
			return nil
		}
		var n Setting[int]
		if err := intSetter(&n)(d); err != nil {
			return err
		}
		if n.Value < 0 {
			return errors.New("must be 0 or more, or unlimited")
		}
		*dst = n
		return nil
	}
}

// cAtoi is C's atoi as php-fpm uses it: leading blanks, a sign, then the
// longest run of digits; anything else ends the number. It saturates at
// the limits of a C int where C would overflow.
func cAtoi(s string) int {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	n := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
		if n > math.MaxInt32 {
			n = math.MaxInt32 + 1
		}
	}
	if neg {
		return max(-n, math.MinInt32)
	}
	return min(n, math.MaxInt32)
}
