package phpfpm

import (
	"errors"
	"strings"
)

// iniLine is one line of php-fpm's configuration after the Zend INI scanner
// (Zend/zend_ini_scanner.l, ZEND_INI_SCANNER_NORMAL) has read it.
type iniLine struct {
	section  string // set for "[name]"
	key      string // set for "key = value", including any "[sub]"
	value    string
	isEntry  bool
	isHeader bool
}

var (
	errNoValue       = errors.New(`no "=": php-fpm reads a key without a value as an error`)
	errUnterminated  = errors.New("unterminated quote")
	errBadSection    = errors.New(`section header without "]"`)
	errEqualsInValue = errors.New(`unquoted "=" in value`)
	errEmptyKey      = errors.New("empty key")
)

// parseINILine reads one line. php-fpm hands the scanner a single line at a
// time (fpm_conf_load_ini_file), so no construct spans lines: an opening
// quote without its closing one is an error here, as it is for php-fpm.
func parseINILine(s string) (iniLine, error) {
	// The line is a C string to php-fpm: a NUL ends it.
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimLeft(s, " \t")
	s = strings.TrimRight(s, " \t\r\n")
	// '#' stopped being a comment in PHP 7.0 and php-fpm 8.2 refuses such a
	// line; reading it as a comment lets an edited file still load.
	if s == "" || s[0] == ';' || s[0] == '#' {
		return iniLine{}, nil
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return iniLine{}, errBadSection
		}
		name := strings.TrimSpace(s[1:end])
		name = strings.Trim(name, `"'`)
		return iniLine{section: name, isHeader: true}, nil
	}
	return parseEntry(s)
}

func parseEntry(s string) (iniLine, error) {
	eq := strings.IndexAny(s, "=;")
	if eq < 0 || s[eq] == ';' {
		return iniLine{}, errNoValue
	}
	key := strings.TrimRight(s[:eq], " \t")
	if key == "" {
		return iniLine{}, errEmptyKey
	}
	value, err := lexValue(s[eq+1:])
	if err != nil {
		return iniLine{}, err
	}
	return iniLine{key: key, value: value, isEntry: true}, nil
}

// lexValue reads a value the way the scanner does in normal mode: a run of
// unquoted text, "double quoted" and 'single quoted' pieces concatenated, a
// ';' outside quotes starting a comment. An unquoted value that is exactly
// one of the INI keywords becomes "1" or "", which is the only spelling of
// a boolean fpm_conf_set_boolean accepts. ${VAR} and constants are left as
// written: their values live in the master's environment, not in the file.
func lexValue(s string) (string, error) {
	s = strings.TrimLeft(s, " \t")
	var b strings.Builder
	quoted := false
	for i := 0; i < len(s); {
		switch c := s[i]; c {
		case '"':
			end := closingDoubleQuote(s, i+1)
			if end < 0 {
				return "", errUnterminated
			}
			b.WriteString(unescapeDouble(s[i+1 : end]))
			quoted = true
			i = end + 1
			// The scanner drops the blanks after a double-quoted piece.
			for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
				i++
			}
		case '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return "", errUnterminated
			}
			b.WriteString(s[i+1 : i+1+end])
			quoted = true
			i += end + 2
		case ';':
			i = len(s)
		default:
			j := i
			for j < len(s) && s[j] != '"' && s[j] != ';' {
				if s[j] == '=' {
					return "", errEqualsInValue
				}
				j++
			}
			b.WriteString(strings.TrimRight(s[i:j], " \t"))
			i = j
		}
	}
	v := b.String()
	if !quoted {
		switch strings.ToLower(v) {
		case "true", "on", "yes":
			return "1", nil
		case "false", "off", "no", "none", "null":
			return "", nil
		}
	}
	return v, nil
}

func closingDoubleQuote(s string, from int) int {
	for i := from; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// unescapeDouble follows zend_ini_escape_string: only \" \\ and \$ are
// escapes; any other backslash stays.
func unescapeDouble(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			switch s[i+1] {
			case '"', '\\', '$':
				b.WriteByte(s[i+1])
				i++
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
