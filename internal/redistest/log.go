package redistest

import (
	"bytes"
	"io"
	"os"
	"strings"
)

// logTailBytes bounds how much of a server's log goes into an error message.
const logTailBytes = 2048

// logTail returns the end of the log written since offset from, ready to
// append to an error message.
func logTail(path string, from int64) string {
	b := readLog(path, from)
	if len(b) > logTailBytes {
		b = b[len(b)-logTailBytes:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:] // start at a whole line
		}
	}
	text := strings.TrimSpace(string(b))
	if text == "" {
		text = "(empty)"
	}
	return "--- redis-server log ---\n" + text
}

// bindFailed reports whether the log since from says the port was taken.
func bindFailed(path string, from int64) bool {
	return bytes.Contains(readLog(path, from), []byte("Address already in use"))
}

// readLog returns the log from offset from on, or nil if it cannot be read.
func readLog(path string, from int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return nil
	}
	b, _ := io.ReadAll(f)
	return b
}
