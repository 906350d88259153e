package faultproxy

import (
	"bufio"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// echo is a line echo server for the proxy to sit in front of.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, deadline time.Duration) (string, error) {
	t.Helper()
	require.NoError(t, c.SetDeadline(time.Now().Add(deadline)))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	return r.ReadString('\n')
}

func TestProxyFaults(t *testing.T) {
	// Registered first, so it runs after every other cleanup.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	target := echo(t)
	p := Start(t, target)
	c, err := net.Dial("tcp", p.Addr())
	require.NoError(t, err)
	defer c.Close()
	r := bufio.NewReader(c)

	line, err := roundTrip(t, c, r, 2*time.Second)
	require.NoError(t, err)
	assert.Equal(t, "ping\n", line, "forwards")

	p.SetLatency(100 * time.Millisecond)
	start := time.Now()
	_, err = roundTrip(t, c, r, 5*time.Second)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "latency both ways")
	p.SetLatency(0)

	p.BlackHole(true)
	_, err = roundTrip(t, c, r, 200*time.Millisecond)
	var ne net.Error
	require.ErrorAs(t, err, &ne, "a black hole answers nothing")
	assert.True(t, ne.Timeout())
	p.Close()
}
