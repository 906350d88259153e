package throttle

// reserveAlgo runs req's policy on its key's state; m.mu is held.
func (m *MemoryStore) reserveAlgo(req request, now int64) decision {
	k := memKey{prefix: req.prefix, name: req.one.Key, kind: req.pol.kind()}
	st, had := m.states[k]
	d := req.pol.reserveMem(&st, now, req.one.N, req.maxWait)
	d.now = now
	switch {
	case st == nil:
		delete(m.states, k)
	case !had:
		m.states[k] = st
		m.sweep(now)
		m.states[k] = st // a sweep may have dropped it, if idle already
	default:
		m.states[k] = st
	}
	if !d.granted {
		d.tat = 0
	}
	return d
}

// refundAlgo runs req's policy's refund on its key's state; m.mu is held and
// the marker is set.
func (m *MemoryStore) refundAlgo(req request, d decision, now int64) {
	k := memKey{prefix: req.prefix, name: req.one.Key, kind: req.pol.kind()}
	st := m.states[k]
	if st == nil {
		return
	}
	req.pol.refundMem(&st, now, req.one.N, d)
	if st == nil {
		delete(m.states, k)
	} else {
		m.states[k] = st
	}
}
