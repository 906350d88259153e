package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// errPortInUse means the server could not have the port: it failed to bind,
// or another process answered on it.
var errPortInUse = errors.New("port already in use")

// probeTimeout bounds one readiness probe.
const probeTimeout = 500 * time.Millisecond

// probe asks the server at addr for PONG over a raw connection, and checks
// that the answer comes from pid and not from some other server that holds
// the port. password, if set, is sent with AUTH first.
func probe(addr, password string, pid int) error { return probeWith(addr, password, pid, nil) }

// probeWith is probe over TLS with tlsConfig, or over plain TCP if it is nil.
func probeWith(addr, password string, pid int, tlsConfig *tls.Config) error {
	dialer := &net.Dialer{Timeout: probeTimeout}
	var conn net.Conn
	var err error
	if tlsConfig != nil {
		conn, err = tls.DialWithDialer(dialer, "tcp", addr, tlsConfig)
	} else {
		conn, err = dialer.Dial("tcp", addr)
	}
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if err := conn.SetDeadline(time.Now().Add(probeTimeout)); err != nil {
		return err
	}
	r := bufio.NewReader(conn)
	call := func(args ...string) (string, error) {
		if _, err := conn.Write(encodeCommand(args...)); err != nil {
			return "", err
		}
		return readReply(r)
	}

	if password != "" {
		if _, err := call("AUTH", password); err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
	}
	pong, err := call("PING")
	var rerr replyError
	if errors.As(err, &rerr) && strings.HasPrefix(string(rerr), "NOAUTH") {
		return nil // up, but locked by options we do not know how to pass
	}
	if err != nil {
		return fmt.Errorf("PING: %w", err)
	}
	if pong != "PONG" {
		return fmt.Errorf("PING: got %q, want PONG", pong)
	}

	info, err := call("INFO", "server")
	if errors.As(err, &rerr) {
		return nil // INFO may be denied by ACL options; PONG will do
	}
	if err != nil {
		return fmt.Errorf("INFO: %w", err)
	}
	if got, ok := infoField(info, "process_id"); ok && got != strconv.Itoa(pid) {
		return fmt.Errorf("%w: redis-server pid %s answers on %s, not ours (pid %d)", errPortInUse, got, addr, pid)
	}
	return nil
}

// encodeCommand encodes args as a RESP array of bulk strings.
func encodeCommand(args ...string) []byte {
	b := []byte("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		b = append(b, "$"+strconv.Itoa(len(a))+"\r\n"+a+"\r\n"...)
	}
	return b
}

// replyError is an error reply from the server, such as "NOAUTH Authentication required.".
type replyError string

func (e replyError) Error() string { return "redis: " + string(e) }

// readReply reads one RESP2 reply that is a simple string, error, integer or bulk string.
func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", replyError(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	default:
		return "", fmt.Errorf("unexpected reply %q", line)
	}
}

// infoField returns the value of name in the text of an INFO reply.
func infoField(info, name string) (string, bool) {
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), name+":"); ok {
			return v, true
		}
	}
	return "", false
}
