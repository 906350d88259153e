package main

import (
	"slices"
	"strings"
)

// rename renames the variables of one line of Lua, and in its comments,
// which speak of them by name: names outside strings that are not a field
// (after "." or ":").
func rename(line string, names map[string]string, used map[string]bool) string {
	var b strings.Builder
	comment := false
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == '-' && strings.HasPrefix(line[i:], "--"):
			comment = true
			b.WriteString("--")
			i += 2
		case !comment && (c == '"' || c == '\''):
			j := i + 1
			for j < len(line) && line[j] != c {
				if line[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(line))
			b.WriteString(line[i:j])
			i = j
		case isDigit(c):
			j := i
			for j < len(line) && (isWord(line[j]) || line[j] == '.') {
				j++
			}
			b.WriteString(line[i:j])
			i = j
		case isWord(c):
			j := i
			for j < len(line) && isWord(line[j]) {
				j++
			}
			w := line[i:j]
			// a field, or the end of a word such as "µs"
			field := i > 0 && (line[i-1] == ':' || line[i-1] >= 0x80 || line[i-1] == '.' && (i < 2 || line[i-2] != '.'))
			if new, ok := names[w]; ok && !field {
				w = new
				used[line[i:j]] = true
			}
			b.WriteString(w)
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

// dedent removes the indent the non-blank lines share.
func dedent(lines []string) []string {
	cut := -1
	for _, l := range lines {
		if strings.TrimSpace(l) == "" {
			continue
		}
		n := len(l) - len(strings.TrimLeft(l, " "))
		if cut < 0 || n < cut {
			cut = n
		}
	}
	out := slices.Clone(lines)
	for i, l := range out {
		if strings.TrimSpace(l) == "" {
			out[i] = ""
		} else {
			out[i] = l[cut:]
		}
	}
	return out
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isWord(c byte) bool {
	return c == '_' || isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}
