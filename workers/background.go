package workers

import "time"

// hostsInterval is how often a Pool refreshes Config.Hosts: asynq's heartbeat.
const hostsInterval = 5 * time.Second

// background is the pool's one goroutine of its own: it logs the status line
// every StatusInterval and refreshes Config.Hosts every hostsInterval, until
// stop is closed (Shutdown closes it and waits for this to return).
func (p *Pool) background(stop <-chan struct{}) {
	var status, hosts <-chan time.Time
	if p.cfg.StatusInterval > 0 {
		t := time.NewTicker(p.cfg.StatusInterval)
		defer t.Stop()
		status = t.C
	}
	if p.cfg.Hosts != nil {
		p.refreshHosts()
		t := time.NewTicker(hostsInterval)
		defer t.Stop()
		hosts = t.C
	}
	for {
		select {
		case <-stop:
			return
		case <-status:
			p.log.Info("workers: status", "stats", p.Stats())
		case <-hosts:
			p.refreshHosts()
		}
	}
}

func (p *Pool) refreshHosts() {
	if err := p.cfg.Hosts.Refresh(); err != nil {
		p.log.Warn("workers: cannot count the fleet's hosts; keeping the last count", "hosts", p.cfg.Hosts.Hosts(), "err", err)
	}
}
