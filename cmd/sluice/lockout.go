package main

import (
	"net"
	"sync"
	"time"
)

// Bounds of the wait after wrong tokens.
const (
	lockoutBase    = time.Second      // the wait after one wrong token
	lockoutMax     = time.Minute      // the longest wait
	lockoutForget  = 15 * time.Minute // wrong tokens older than this are forgotten
	lockoutEntries = 4096             // the most addresses remembered
)

// lockout slows down guessing the dashboard's token: after a wrong token an
// address waits lockoutBase, doubling with each further wrong token up to
// lockoutMax; while it waits, its requests are refused without looking at
// the token, and they do not lengthen the wait. A right token forgives the
// address. Only the address that guesses waits: another one, the operator's
// say, is not held (behind a shared proxy, they are one address). IPv6
// addresses count by /64, as one host usually holds the whole prefix.
//
// It is safe for concurrent use.
type lockout struct {
	now func() time.Time

	mu    sync.Mutex
	byKey map[string]*strikes
}

// strikes are one address's wrong tokens.
type strikes struct {
	n     int       // wrong tokens in a row
	last  time.Time // the latest
	until time.Time // the end of its wait
}

func newLockout(now func() time.Time) *lockout {
	return &lockout{now: now, byKey: make(map[string]*strikes)}
}

// wait is how long the address ip must still wait before it may try a token.
func (l *lockout) wait(ip string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.byKey[addressKey(ip)]; s != nil {
		return max(s.until.Sub(l.now()), 0)
	}
	return 0
}

// failed records a wrong token from ip.
func (l *lockout) failed(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now, key := l.now(), addressKey(ip)
	s := l.byKey[key]
	if s == nil {
		l.makeRoom(now)
		s = &strikes{}
		l.byKey[key] = s
	}
	if now.Sub(s.last) > lockoutForget {
		s.n = 0
	}
	s.n++
	d := lockoutMax
	if s.n <= 16 && lockoutBase<<(s.n-1) < lockoutMax {
		d = lockoutBase << (s.n - 1)
	}
	s.last, s.until = now, now.Add(d)
}

// succeeded forgets ip's wrong tokens.
func (l *lockout) succeeded(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.byKey, addressKey(ip))
}

// size is how many addresses are remembered.
func (l *lockout) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.byKey)
}

// makeRoom keeps the table under lockoutEntries before one more: it drops
// the forgotten addresses, and if none is, the one whose wait ends first.
func (l *lockout) makeRoom(now time.Time) {
	if len(l.byKey) < lockoutEntries {
		return
	}
	var first string
	for k, s := range l.byKey {
		if now.Sub(s.last) > lockoutForget {
			delete(l.byKey, k)
			continue
		}
		if first == "" || s.until.Before(l.byKey[first].until) {
			first = k
		}
	}
	if len(l.byKey) >= lockoutEntries {
		delete(l.byKey, first)
	}
}

// addressKey is ip, or its /64 for an IPv6 address.
func addressKey(ip string) string {
	a := net.ParseIP(ip)
	if a == nil || a.To4() != nil {
		return ip
	}
	return a.Mask(net.CIDRMask(64, 128)).String() + "/64"
}
