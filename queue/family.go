package queue

import (
	"strconv"
	"strings"
)

// A queue's family: the asynq queues one named queue is made of, so that
// asynq dequeues the right job first (docs/jobs.md, "The queue side").
//
// A job goes to the member of its queue for its priority and its lane.
// Priority 3 in lane 0 is the queue itself, so a job enqueued with no
// priority and no key goes where it always went; the others are named
// QUEUE:pN (lane 0) and QUEUE:pN:lK. A key (a tenant) is given a lane
// (lanes.go) so that one tenant's backlog is not in front of another's
// first job. A workers.Pool configured with a queue serves its whole family.

// Lanes is how many lanes each priority level of a queue has: keys given
// different lanes never wait behind each other's backlog at dequeue.
const Lanes = 4

// Member is the name of the asynq queue of queue base that holds the jobs of
// priority p (0 is DefaultPriority) in lane lane: base itself for priority 3
// in lane 0, else base:pN, or base:pN:lK for lane K > 0. A priority or lane
// out of range is taken as the nearest one in range.
func Member(base string, p, lane int) string {
	if p == 0 {
		p = DefaultPriority
	}
	p = min(max(p, HighestPriority), LowestPriority)
	lane = min(max(lane, 0), Lanes-1)
	switch {
	case p == DefaultPriority && lane == 0:
		return base
	case lane == 0:
		return base + ":p" + strconv.Itoa(p)
	}
	return base + ":p" + strconv.Itoa(p) + ":l" + strconv.Itoa(lane)
}

// Family is every member of queue base, highest priority first, lane 0
// first within a priority: Lanes × 5 asynq queue names.
func Family(base string) []string {
	out := make([]string, 0, Lanes*(LowestPriority-HighestPriority+1))
	for p := HighestPriority; p <= LowestPriority; p++ {
		for lane := range Lanes {
			out = append(out, Member(base, p, lane))
		}
	}
	return out
}

// ParseMember reads a name Member makes: the base queue, the priority and
// the lane. A name Member does not make (a base, or any other queue) is its
// own base, at DefaultPriority, in lane 0, and ok is false.
func ParseMember(name string) (base string, p, lane int, ok bool) {
	rest := name
	lane = 0
	if i := strings.LastIndex(rest, ":l"); i > 0 {
		if k, err := strconv.Atoi(rest[i+2:]); err == nil && k > 0 && k < Lanes && rest[i+2:] == strconv.Itoa(k) {
			rest, lane = rest[:i], k
		}
	}
	if i := strings.LastIndex(rest, ":p"); i > 0 && len(rest) == i+3 {
		if n := int(rest[i+2] - '0'); n >= HighestPriority && n <= LowestPriority && (n != DefaultPriority || lane > 0) {
			return rest[:i], n, lane, true
		}
	}
	return name, DefaultPriority, 0, false
}

// Reserved reports whether name looks like a member of another queue's
// family (it ends in ":pN" or ":pN:lK"): such a name cannot be a queue of its
// own, since a pool serving its base would also serve it.
func Reserved(name string) bool {
	if _, _, _, ok := ParseMember(name); ok {
		return true
	}
	// Also the names Member does not make but a reader would take for one: "x:p3", "x:p9:l7".
	s := name
	if i := strings.LastIndex(s, ":l"); i > 0 && isDigits(s[i+2:]) {
		s = s[:i]
	}
	i := strings.LastIndex(s, ":p")
	return i > 0 && isDigits(s[i+2:])
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
