package cli

import "unicode/utf8"

// MaxEcho bounds how much of an argument a message repeats, in bytes.
const MaxEcho = 80

// Clip returns s for a message: whole if it is at most [MaxEcho] bytes,
// else its first MaxEcho bytes (cut at a character's boundary) and "…", so
// that a 100 kB argument does not come back as a 100 kB error.
func Clip(s string) string {
	if len(s) <= MaxEcho {
		return s
	}
	cut := MaxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
