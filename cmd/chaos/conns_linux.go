package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// localPorts returns the local ports of pid's TCP connections to remotePort
// on the loopback, read from /proc: the sockets among its file descriptors,
// matched by inode against /proc/net/tcp and tcp6.
func localPorts(pid, remotePort int) ([]int, error) {
	fds, err := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	if err != nil {
		return nil, err
	}
	inodes := make(map[string]bool)
	for _, fd := range fds {
		link, err := os.Readlink(fd)
		if err != nil {
			continue // closed since the glob
		}
		if rest, ok := strings.CutPrefix(link, "socket:["); ok {
			inodes[strings.TrimSuffix(rest, "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(sc.Text())
			if len(fs) < 10 || !inodes[fs[9]] {
				continue
			}
			if hexPort(fs[2]) == remotePort {
				ports = append(ports, hexPort(fs[1]))
			}
		}
		_ = f.Close()
	}
	return ports, nil
}

// hexPort reads the port of an address of /proc/net/tcp, "0100007F:1F90".
func hexPort(addr string) int {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return -1
	}
	p, err := strconv.ParseUint(addr[i+1:], 16, 16)
	if err != nil {
		return -1
	}
	return int(p)
}
