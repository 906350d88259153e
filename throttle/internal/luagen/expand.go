package main

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	// funcLine and returnLine open and close a function fragment's function.
	funcLine   = regexp.MustCompile(`^(?:local )?function ([\w.]+)\(([\w, ]*)\)$`)
	returnLine = regexp.MustCompile(`^return (\w+)$`)
	// callLine is a statement "[local] x = f(args)", a call a fragment may
	// make of a function fragment.
	callLine = regexp.MustCompile(`^(local )?(\w+) = (\w+)\((.*)\)$`)
	// simple is a new name that needs no parentheses.
	simple = regexp.MustCompile(`^[\w.]+$`)
)

// expand replaces each "--= name old=new ..." line of src by its fragment.
func expand(src string, frags map[string]fragment) (string, error) {
	var b strings.Builder
	lines := strings.Split(src, "\n")
	for i, line := range lines {
		t := strings.TrimSpace(line)
		if !strings.HasPrefix(t, "--=") {
			b.WriteString(line)
			if i < len(lines)-1 {
				b.WriteByte('\n')
			}
			continue
		}
		args := strings.Fields(strings.TrimPrefix(t, "--="))
		if len(args) == 0 {
			return "", fmt.Errorf("line %d: --= names no fragment", i+1)
		}
		names := map[string]string{}
		for _, a := range args[1:] {
			old, new, ok := strings.Cut(a, "=")
			if !ok || old == "" || new == "" {
				return "", fmt.Errorf("line %d: %q is not old=new", i+1, a)
			}
			names[old] = new
		}
		indent := line[:len(line)-len(strings.TrimLeft(line, " "))]
		if err := include(&b, indent, args[0], names, frags, 0); err != nil {
			return "", fmt.Errorf("line %d: %w", i+1, err)
		}
	}
	return b.String(), nil
}

// include writes fragment name with its variables renamed, indented, and
// the calls it makes of function fragments written out the same way.
func include(b *strings.Builder, indent, name string, names map[string]string, frags map[string]fragment, depth int) error {
	f, ok := frags[name]
	if !ok {
		return fmt.Errorf("no fragment %s", name)
	}
	if depth > 8 {
		return fmt.Errorf("fragment %s: calls nested too deep", name)
	}
	for old, new := range names {
		if !simple.MatchString(new) {
			names[old] = "(" + new + ")"
		}
	}
	used := map[string]bool{}
	fmt.Fprintf(b, "%s-- %s (%s)", indent, name, f.file)
	if f.note != "" {
		b.WriteString(": " + rename(f.note, names, used))
	}
	b.WriteByte('\n')
	for _, l := range f.lines {
		if l == "" {
			b.WriteByte('\n')
			continue
		}
		l = rename(l, names, used)
		in := indent + l[:len(l)-len(strings.TrimLeft(l, " "))]
		if m := callLine.FindStringSubmatch(strings.TrimSpace(l)); m != nil && frags[m[3]].result != "" {
			callee := frags[m[3]]
			args := splitArgs(m[4])
			if len(args) != len(callee.params) {
				return fmt.Errorf("fragment %s: %s takes %d arguments", name, m[3], len(callee.params))
			}
			if m[1] != "" {
				fmt.Fprintf(b, "%slocal %s\n", in, m[2])
			}
			inner := map[string]string{callee.result: m[2]}
			for k, p := range callee.params {
				inner[p] = args[k]
			}
			if err := include(b, in, m[3], inner, frags, depth+1); err != nil {
				return err
			}
			continue
		}
		b.WriteString(indent)
		b.WriteString(l)
		b.WriteByte('\n')
	}
	for old := range names {
		if !used[old] {
			return fmt.Errorf("fragment %s has no variable %s", name, old)
		}
	}
	return nil
}

// splitArgs splits a call's arguments at the commas outside parentheses.
func splitArgs(s string) []string {
	var args []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				args = append(args, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(args, strings.TrimSpace(s[start:]))
}
