package cli

import (
	"strings"
	"unicode/utf8"
)

// Bounds of what a message repeats of its input, in bytes.
const (
	MaxEcho    = 80   // one argument, or one word of a message
	MaxMessage = 1000 // a whole message
)

// Clip returns s for a message: whole if it is at most [MaxEcho] bytes,
// else its first MaxEcho bytes (cut at a character's boundary) and "…", so
// that a 100 kB argument does not come back as a 100 kB error.
func Clip(s string) string { return clipTo(s, MaxEcho) }

// ClipMessage returns msg with each word longer than [MaxEcho] bytes clipped
// as [Clip] does (keeping its closing quote and punctuation), and the whole cut to [MaxMessage] bytes: [Report] writes
// every error through it, so no message echoes a huge argument, wherever
// the argument went in.
func ClipMessage(msg string) string {
	if len(msg) <= MaxEcho {
		return msg
	}
	var b strings.Builder
	word := 0 // start of the current word
	for i := 0; i <= len(msg); i++ {
		if i < len(msg) && msg[i] != ' ' && msg[i] != '\n' {
			continue
		}
		w := msg[word:i]
		tail := len(w) // the closing quote and punctuation a clipped word keeps: "xxx…":
		for tail > 0 && len(w)-tail < 3 && strings.IndexByte(`"'):,;.]`, w[tail-1]) >= 0 {
			tail--
		}
		if len(w) > MaxEcho {
			w = Clip(w[:tail]) + w[tail:]
		}
		b.WriteString(w)
		if i < len(msg) {
			b.WriteByte(msg[i])
		}
		word = i + 1
	}
	return clipTo(b.String(), MaxMessage)
}

func clipTo(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
