package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterNodeTimeout is --cluster-node-timeout: how long a node may be
	// unreachable before the others fail it over. Short, so tests that kill a
	// master see its replica take over within a few seconds.
	clusterNodeTimeout = 2 * time.Second
	// clusterCreateTimeout bounds redis-cli --cluster create.
	clusterCreateTimeout = 30 * time.Second
	// clusterReadyTimeout bounds the wait for every node to agree the cluster is up.
	clusterReadyTimeout = 15 * time.Second
	// clusterSlots is how many hash slots a Redis Cluster has.
	clusterSlots = 16384
)

// Cluster is a Redis Cluster of real redis-server processes on free loopback
// ports, owned by one test. Each node is a Server, so a test can Pause, Kill or
// Restart one (see Master); a killed master's replica takes over after the
// node timeout of two seconds. Nodes keep no data on disk, only their cluster
// configuration (nodes.conf), so a restarted node rejoins as the same node,
// empty. Its methods are safe for concurrent use.
type Cluster struct {
	nodes []*Server
}

// StartCluster starts masters×(1+replicasPerMaster) redis-servers with
// cluster mode on, joins them with redis-cli --cluster create (masters share
// the 16384 slots evenly, each has replicasPerMaster replicas), and returns
// once every node reports cluster_state:ok with every slot served and every
// replica in sync with its master. The nodes are stopped when tb finishes.
// StartCluster fails tb, with the tail of the nodes' logs, if the cluster
// does not come up.
//
// redis-cli wants at least 3 masters. One or two masters, without replicas,
// are joined by hand (CLUSTER ADDSLOTSRANGE and CLUSTER MEET): a cluster of
// one master is the baseline that a test compares more masters against.
func StartCluster(tb testing.TB, masters, replicasPerMaster int) *Cluster {
	tb.Helper()
	if masters < 1 || replicasPerMaster < 0 || (masters < 3 && replicasPerMaster > 0) {
		tb.Fatalf("redistest: StartCluster(%d, %d): need at least 1 master, no negative replica count, "+
			"and 3 masters for replicas (redis-cli --cluster create)", masters, replicasPerMaster)
	}
	c := &Cluster{nodes: make([]*Server, masters*(1+replicasPerMaster))}
	tb.Cleanup(c.stop)

	// Start the nodes side by side: each one waits mostly on its own readiness probe.
	errs := make([]error, len(c.nodes))
	var wg sync.WaitGroup
	for i := range c.nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.nodes[i], errs[i] = startWith(nil, clusterNodeSetup)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatalf("redistest: start cluster nodes: %v", err)
	}

	create := func() error { return c.create(replicasPerMaster) }
	if masters < 3 {
		create = c.join
	}
	if err := create(); err != nil {
		tb.Fatalf("redistest: create cluster: %v\n%s", err, c.logs())
	}
	if err := c.waitReady(masters); err != nil {
		tb.Fatalf("redistest: cluster did not come up within %v: %v\n%s", clusterReadyTimeout, err, c.logs())
	}
	return c
}

// clusterNodeSetup turns on cluster mode, with the node's configuration file
// in its own directory.
func clusterNodeSetup(s *Server) error {
	s.args = append(s.args,
		"--cluster-enabled", "yes",
		"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
		"--cluster-node-timeout", strconv.FormatInt(clusterNodeTimeout.Milliseconds(), 10),
		// Replicas sync at once instead of waiting 5 s for others to share the transfer.
		"--repl-diskless-sync-delay", "0",
		// A node learns its own address from the others; a cluster of one
		// has none, and would name itself ":PORT" in CLUSTER SLOTS.
		"--cluster-announce-ip", "127.0.0.1",
	)
	return nil
}

// create runs redis-cli --cluster create over every node.
func (c *Cluster) create(replicasPerMaster int) error {
	cli, err := findCLI()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicasPerMaster), "--cluster-yes")
	out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n--- redis-cli output ---\n%s", cli, strings.Join(args, " "), err, tail(out))
	}
	return nil
}

// join makes a cluster of masters only, without redis-cli: each node takes
// an even share of the slots, and the first node meets the others.
func (c *Cluster) join() error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	first := c.nodes[0].newClient()
	defer func() { _ = first.Close() }()
	n := len(c.nodes)
	for i, s := range c.nodes {
		lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		rdb := s.newClient()
		err := rdb.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err()
		_ = rdb.Close()
		if err == nil && i > 0 {
			err = first.ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(s.port)).Err()
		}
		if err != nil {
			return fmt.Errorf("%s: slots %d-%d: %w", s.Addr(), lo, hi, err)
		}
	}
	return nil
}

// waitReady polls every node until each says the cluster is up with all slots
// served and knows every other node, there are masters masters, and each
// replica's link to its master is up.
func (c *Cluster) waitReady(masters int) error {
	clients := make([]*redis.Client, len(c.nodes))
	for i, s := range c.nodes {
		clients[i] = s.newClient()
		defer func() { _ = clients[i].Close() }()
	}
	deadline := time.Now().Add(clusterReadyTimeout)
	for {
		err := c.ready(clients, masters)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ready checks the cluster once; see waitReady.
func (c *Cluster) ready(clients []*redis.Client, masters int) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	nMasters := 0
	for i, rdb := range clients {
		addr := c.nodes[i].Addr()
		info, err := rdb.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", addr, err)
		}
		for field, want := range map[string]string{
			"cluster_state":       "ok",
			"cluster_slots_ok":    strconv.Itoa(clusterSlots),
			"cluster_known_nodes": strconv.Itoa(len(c.nodes)),
		} {
			if got, _ := infoField(info, field); got != want {
				return fmt.Errorf("%s: CLUSTER INFO says %s:%s, want %s", addr, field, got, want)
			}
		}
		repl, err := rdb.Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Errorf("%s: INFO replication: %w", addr, err)
		}
		switch role, _ := infoField(repl, "role"); role {
		case "master":
			nMasters++
		case "slave":
			if link, _ := infoField(repl, "master_link_status"); link != "up" {
				return fmt.Errorf("%s: replica link to its master is %q, want up", addr, link)
			}
		default:
			return fmt.Errorf("%s: unknown role %q", addr, role)
		}
	}
	if nMasters != masters {
		return fmt.Errorf("%d masters, want %d", nMasters, masters)
	}
	return nil
}

// Addrs returns every node's address, "127.0.0.1:PORT", masters and replicas,
// in the order they were started.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Nodes returns every node, in the order of Addrs.
func (c *Cluster) Nodes() []*Server {
	return append([]*Server(nil), c.nodes...)
}

// Client returns a new cluster client seeded with every node's address, with
// ContextTimeoutEnabled so that a context's deadline bounds every call. It is
// closed when tb finishes.
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 c.Addrs(),
		ContextTimeoutEnabled: true,
	})
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Master returns the node that serves key's hash slot now, as the running
// nodes see it: after a failover, the promoted replica. key is a whole Redis
// key, hash tag included ("sluice:{api}"). Master fails tb if no running node
// answers or none serves the slot.
func (c *Cluster) Master(tb testing.TB, key string) *Server {
	tb.Helper()
	s, err := c.master(key)
	if err != nil {
		tb.Fatalf("redistest: master of %q: %v", key, err)
	}
	return s
}

func (c *Cluster) master(key string) (*Server, error) {
	var errs []error
	for _, node := range c.nodes {
		if !node.running() {
			continue
		}
		s, err := c.masterFrom(node, key)
		if err == nil {
			return s, nil
		}
		errs = append(errs, fmt.Errorf("asking %s: %w", node.Addr(), err))
	}
	if len(errs) == 0 {
		return nil, errors.New("no node is running")
	}
	return nil, errors.Join(errs...)
}

// masterFrom asks node which node serves key's slot.
func (c *Cluster) masterFrom(node *Server, key string) (*Server, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	rdb := node.newClient()
	defer func() { _ = rdb.Close() }()
	slot, err := rdb.ClusterKeySlot(ctx, key).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER KEYSLOT: %w", err)
	}
	ranges, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	for _, r := range ranges {
		if int64(r.Start) > slot || slot > int64(r.End) || len(r.Nodes) == 0 {
			continue
		}
		addr := r.Nodes[0].Addr // the master comes first
		for _, s := range c.nodes {
			if s.Addr() == addr {
				return s, nil
			}
		}
		return nil, fmt.Errorf("slot %d is served by %s, not a node of this cluster", slot, addr)
	}
	return nil, fmt.Errorf("no node serves slot %d", slot)
}

// stop stops every node, side by side.
func (c *Cluster) stop() {
	var wg sync.WaitGroup
	for _, s := range c.nodes {
		if s != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.Stop()
			}()
		}
	}
	wg.Wait()
}

// logs returns the tail of every node's log, for an error message.
func (c *Cluster) logs() string {
	var b strings.Builder
	for _, s := range c.nodes {
		if s == nil {
			continue
		}
		fmt.Fprintf(&b, "=== node %s\n%s\n", s.Addr(), logTail(filepath.Join(s.dir, "redis.log"), 0))
	}
	return b.String()
}

// tail returns the end of a command's output, at most logTailBytes.
func tail(out []byte) string {
	if len(out) > logTailBytes {
		out = out[len(out)-logTailBytes:]
	}
	return strings.TrimSpace(string(out))
}

// findCLI returns the redis-cli to run: $REDIS_CLI if set, else the one beside
// redis-server, else redis-cli from PATH.
func findCLI() (string, error) {
	if name := os.Getenv("REDIS_CLI"); name != "" {
		path, err := exec.LookPath(name)
		if err != nil {
			return "", fmt.Errorf("REDIS_CLI=%q: %w", name, err)
		}
		return path, nil
	}
	if bin, err := findBinary(); err == nil {
		if path, err := exec.LookPath(filepath.Join(filepath.Dir(bin), "redis-cli")); err == nil {
			return path, nil
		}
	}
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		return "", errors.New("redis-cli not found beside redis-server or in PATH: install it (it comes with redis-server) or set REDIS_CLI to its path")
	}
	return path, nil
}
