package multiraft_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/cluster/multiraft"
	"go.etcd.io/raft/v3"
)

// TestScripts runs the cluster scenarios in testdata/script (etcd raft's data-driven
// style): each block is a command, "----", and the output it must print. Nodes are n1…nN;
// g=G names a group (default 1). Only deterministic facts are printed: which follower
// wins an election nobody called is raft's random choice, so scripts say "not=n1".
//
//	cluster nodes=4 voters=3 [groups=1] [snapshot=N] [quiesce=off]   hosts n1..n4; groups on n1..n3
//	campaign n1            tick [n=1] [on=n2,n3]  partition n1 | n2 n3        heal
//	propose n1 x [within=50] [as=p]   the proposal's index, error, or "pending" (then: await p)
//	await p [within=50]    wait-leader [not=n1] [within=100] [on=n2,n3]   status   applied   quiesced
//	kill n1    restart n1  transfer n2   add-learner n4   promote n4   remove n3   ticks   check
//	wipe n1    the node dies and loses its disk (restart brings it back on an empty one)
//	blank n1   whether the replica is blank: empty, it grants no vote (voting.go)
//	change +n4 -n3 ~n5     one ConfChangeV2 (voter, removal, learner): joint consensus
//	remove-group n1        the node stops hosting the group
//	move n1,n2,n4 [steps=1] [ticks=3] [until=change] [print=all|last|none]   the leader's
//	                       next steps toward those voters; voters: each node's configuration
//	                       (script_move_test.go)
func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/script/*.txt")
	if len(files) == 0 {
		t.Fatal("no scripts")
	}
	disks := []struct {
		name string
		make func(seed int64) func(multiraft.NodeID) disk
	}{
		{"mem", func(int64) func(multiraft.NodeID) disk { return newMemDisk }},
		{"raftstore", newStoreDisk},
	}
	for _, d := range disks {
		for _, file := range files {
			t.Run(d.name+"/"+filepath.Base(file), func(t *testing.T) {
				data, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				s := &script{t: t, props: map[string]*pending{}, newDisk: d.make}
				s.run(string(data))
				if s.c != nil {
					if err := s.c.checkSafety(false); err != nil {
						t.Error(err)
					}
				}
			})
		}
	}
}

type pending struct {
	p    *multiraft.Proposal
	g    multiraft.GroupID
	node multiraft.NodeID
	data string
}

type script struct {
	t       *testing.T
	newDisk func(seed int64) func(multiraft.NodeID) disk // every node's disk: MemEngine or raftstore
	c       *cluster
	props   map[string]*pending
	ticks   map[multiraft.NodeID]uint64
}

func (s *script) run(text string) {
	for _, b := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n\n") {
		var lines []string
		for _, l := range strings.Split(strings.TrimSpace(b), "\n") {
			if !strings.HasPrefix(l, "#") && strings.TrimSpace(l) != "" {
				lines = append(lines, l)
			}
		}
		if len(lines) == 0 {
			continue
		}
		cmd, want := lines[0], ""
		if len(lines) > 1 {
			if lines[1] != "----" {
				s.t.Fatalf("%q: want ---- after the command", cmd)
			}
			want = strings.Join(lines[2:], "\n")
		}
		if got := strings.TrimSpace(s.do(cmd)); got != want {
			s.t.Errorf("tick %d: %s\n got:\n%s\n want:\n%s", s.tick(), cmd, got, want)
		}
	}
}

func (s *script) tick() uint64 {
	if s.c == nil {
		return 0
	}
	return s.c.ticks
}

func args(fields []string) (pos []string, kv map[string]string) {
	kv = map[string]string{}
	for _, f := range fields {
		if k, v, ok := strings.Cut(f, "="); ok {
			kv[k] = v
		} else {
			pos = append(pos, f)
		}
	}
	return pos, kv
}

func (s *script) num(kv map[string]string, k string, def int) int {
	if kv[k] == "" {
		return def
	}
	n, err := strconv.Atoi(kv[k])
	if err != nil {
		s.t.Fatalf("%s=%q: %v", k, kv[k], err)
	}
	return n
}

// node reads "n3", or "leader": g1's leader now.
func (s *script) node(w string) multiraft.NodeID {
	if w == "leader" {
		lead, _ := s.c.leader(1)
		if lead == 0 {
			s.t.Fatalf("no leader")
		}
		return lead
	}
	n, err := strconv.Atoi(strings.TrimPrefix(w, "n"))
	if err != nil || !strings.HasPrefix(w, "n") || s.c.nodes[multiraft.NodeID(n)] == nil {
		s.t.Fatalf("no node %q", w)
	}
	return multiraft.NodeID(n)
}

func (s *script) do(line string) string {
	f := strings.Fields(line)
	pos, kv := args(f[1:])
	g := multiraft.GroupID(1)
	if s.c != nil {
		g = multiraft.GroupID(s.num(kv, "g", 1))
	}
	switch f[0] {
	case "cluster":
		return s.cluster(kv)
	case "campaign":
		err := s.c.nodes[s.node(pos[0])].host.Campaign(g)
		s.c.settle()
		return errString(err)
	case "tick":
		for range s.num(kv, "n", 1) {
			s.tickOn(kv["on"])
		}
		return ""
	case "partition":
		return s.partition(pos)
	case "heal":
		s.c.net.Heal()
		return ""
	case "propose":
		return s.propose(g, pos, kv)
	case "await":
		return s.await(pos[0], s.num(kv, "within", 50))
	case "wait-leader":
		return s.waitLeader(g, kv)
	case "status":
		return s.status(g)
	case "role":
		st, err := s.c.nodes[s.node(pos[0])].host.Status(g)
		if err != nil {
			return "error: " + err.Error()
		}
		if st.Role == raft.StateLeader { // follower, candidate or precandidate is timing
			return "leader"
		}
		return "not leader"
	case "applied":
		return s.applied(g)
	case "quiesced":
		return s.quiesced(g)
	case "kill":
		s.c.kill(s.node(pos[0]))
		return ""
	case "restart":
		s.c.restart(s.node(pos[0]))
		return ""
	case "wipe":
		s.c.wipe(s.node(pos[0]))
		return ""
	case "blank":
		st, err := s.c.nodes[s.node(pos[0])].host.Status(g)
		if err != nil {
			return "error: " + err.Error()
		}
		if st.Blank {
			return "blank"
		}
		return "not blank"
	case "transfer", "add-learner", "promote", "remove":
		return s.membership(f[0], g, s.node(pos[0]), s.num(kv, "within", 100))
	case "change":
		return s.change(g, pos, s.num(kv, "within", 100))
	case "move":
		return s.move(g, pos[0], kv)
	case "voters":
		return s.voters(g)
	case "remove-group":
		nd := s.c.nodes[s.node(pos[0])]
		delete(nd.sms, g)
		nd.groups = slices.DeleteFunc(nd.groups, func(x multiraft.GroupID) bool { return x == g })
		return errString(nd.host.RemoveGroup(g))
	case "ticks":
		return s.groupTicks()
	case "check":
		return errString(s.c.checkSafety(kv["converged"] == "true"))
	}
	s.t.Fatalf("unknown command %q", line)
	return ""
}

func errString(err error) string {
	if err != nil {
		return "error: " + err.Error()
	}
	return "ok"
}

func (s *script) cluster(kv map[string]string) string {
	cfg := multiraft.Config{DisableQuiesce: kv["quiesce"] == "off",
		SnapshotEntries: uint64(s.num(kv, "snapshot", 0))}
	n := s.num(kv, "nodes", 3)
	seed := int64(s.num(kv, "seed", 1))
	s.c = newClusterOn(s.t, seed, n, cfg, s.newDisk(seed))
	var voters []multiraft.NodeID
	for i := 1; i <= s.num(kv, "voters", n); i++ {
		voters = append(voters, multiraft.NodeID(i))
	}
	for g := 1; g <= s.num(kv, "groups", 1); g++ {
		s.c.createGroup(multiraft.GroupID(g), voters, voters)
	}
	s.ticks = map[multiraft.NodeID]uint64{}
	return ""
}

func (s *script) partition(pos []string) string {
	var sides [][]multiraft.NodeID
	var cur []multiraft.NodeID
	for _, w := range pos {
		if w == "|" {
			sides, cur = append(sides, cur), nil
			continue
		}
		cur = append(cur, s.node(w))
	}
	s.c.net.Partition(append(sides, cur)...)
	return ""
}

func (s *script) propose(g multiraft.GroupID, pos []string, kv map[string]string) string {
	id := s.node(pos[0])
	p, err := s.c.nodes[id].host.ProposeAsync(g, []byte(pos[1]))
	if err != nil {
		return "error: " + err.Error()
	}
	name := kv["as"]
	if name == "" {
		name = pos[1]
	}
	s.props[name] = &pending{p: p, g: g, node: id, data: pos[1]}
	return s.await(name, s.num(kv, "within", 50))
}

func (s *script) await(name string, within int) string {
	pd := s.props[name]
	if pd == nil {
		s.t.Fatalf("no proposal %q", name)
	}
	if !s.c.await(pd.p, within) {
		return "pending"
	}
	idx, err := pd.p.Result()
	if err != nil {
		return "error: " + err.Error()
	}
	s.c.record(pd.g, pd.node, idx, pd.data)
	return fmt.Sprintf("index=%d", idx)
}

// waitLeader ticks until a live node leads g with a majority of its voters following.
func (s *script) waitLeader(g multiraft.GroupID, kv map[string]string) string {
	within := s.num(kv, "within", 100)
	for i := 0; i <= within; i++ {
		if lead, term := s.c.leader(g); lead != 0 && (kv["not"] == "" || lead != s.node(kv["not"])) {
			// a majority of the leader's voters follow it in its term
			lst, _ := s.c.nodes[lead].host.Status(g)
			agree := 0
			for _, v := range lst.Voters {
				if nd := s.c.nodes[v]; nd.up {
					st, err := nd.host.Status(g)
					if err == nil && st.Leader == lead && st.Term == term {
						agree++
					}
				}
			}
			if agree > len(lst.Voters)/2 {
				return "ok"
			}
		}
		s.tickOn(kv["on"])
	}
	return fmt.Sprintf("no leader after %d ticks", within)
}

// tickOn ticks every node's clock, or with on ("n2,n3") only those nodes'
// (the others' raft never times out).
func (s *script) tickOn(on string) {
	if on == "" {
		s.c.tick()
		return
	}
	s.c.ticks++
	for _, n := range strings.Split(on, ",") {
		if nd := s.c.nodes[s.node(n)]; nd.up {
			nd.host.Tick()
		}
	}
	s.c.net.Advance()
	s.c.settle()
}

func (s *script) status(g multiraft.GroupID) string {
	var out []string
	for _, nd := range s.c.up() {
		st, err := nd.host.Status(g)
		if err != nil {
			out = append(out, fmt.Sprintf("n%d: %v", nd.id, err))
			continue
		}
		line := fmt.Sprintf("n%d %s", nd.id, role(st.Role))
		if st.Role != raft.StateLeader {
			line += fmt.Sprintf(" leader=n%d", st.Leader)
		}
		line += fmt.Sprintf(" term=%d commit=%d applied=%d voters=%v", st.Term, st.Commit, st.Applied, names(st.Voters))
		if len(st.Learners) > 0 {
			line += fmt.Sprintf(" learners=%v", names(st.Learners))
		}
		if st.Quiesced {
			line += " quiesced"
		}
		if st.Removed {
			line += " removed"
		}
		out = append(out, line)
	}
	return strings.Join(out, "\n")
}

func role(r raft.StateType) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "State"))
}

func names(ids []multiraft.NodeID) string {
	var s []string
	for _, id := range ids {
		s = append(s, fmt.Sprintf("n%d", id))
	}
	return strings.Join(s, ",")
}

func (s *script) applied(g multiraft.GroupID) string {
	var out []string
	for _, nd := range s.c.up() {
		sm := nd.sms[g]
		if sm == nil {
			continue
		}
		var ds []string
		for _, e := range sm.entries() {
			ds = append(ds, fmt.Sprintf("%d:%s", e.Index, e.Data))
		}
		out = append(out, fmt.Sprintf("n%d: %s", nd.id, strings.Join(ds, " ")))
	}
	return strings.Join(out, "\n")
}

func (s *script) quiesced(g multiraft.GroupID) string {
	var q []string
	for _, nd := range s.c.up() {
		if st, err := nd.host.Status(g); err == nil && st.Quiesced {
			q = append(q, fmt.Sprintf("n%d", nd.id))
		}
	}
	if len(q) == 0 {
		return "none"
	}
	return strings.Join(q, " ")
}

// groupTicks prints each live node's RawNode ticks since the last "ticks".
func (s *script) groupTicks() string {
	var out []string
	for _, nd := range s.c.up() {
		n := nd.host.Stats().GroupTicks
		out = append(out, fmt.Sprintf("n%d=%d", nd.id, n-s.ticks[nd.id]))
		s.ticks[nd.id] = n
	}
	return strings.Join(out, " ")
}

// membership runs a transfer or a configuration change through g's leader and ticks until
// it took effect.
func (s *script) membership(op string, g multiraft.GroupID, target multiraft.NodeID, within int) string {
	lead, _ := s.c.leader(g)
	if lead == 0 {
		return "no leader"
	}
	h := s.c.nodes[lead].host
	if op == "transfer" {
		if err := h.TransferLeadership(g, target); err != nil {
			return "error: " + err.Error()
		}
		for range within {
			if l, _ := s.c.leader(g); l == target {
				return "ok"
			}
			s.c.tick()
		}
		return "transfer did not complete"
	}
	var ch multiraft.Change
	switch op {
	case "add-learner":
		if nd := s.c.nodes[target]; !slices.Contains(nd.groups, g) {
			s.c.createGroup(g, []multiraft.NodeID{target}, nil)
		}
		ch = multiraft.Change{Kind: multiraft.AddLearner, Node: target}
	case "promote":
		ch = multiraft.Change{Kind: multiraft.AddVoter, Node: target}
	case "remove":
		ch = multiraft.Change{Kind: multiraft.RemoveNode, Node: target}
	}
	p, err := h.ChangeMembershipAsync(g, ch)
	if err != nil {
		return "error: " + err.Error()
	}
	if !s.c.await(p, within) {
		return "pending"
	}
	idx, err := p.Result()
	if err != nil {
		var nl *multiraft.NotLeaderError
		if errors.As(err, &nl) {
			return "error: not leader"
		}
		return "error: " + err.Error()
	}
	return fmt.Sprintf("index=%d", idx)
}

// change proposes several membership changes in one ConfChangeV2 (joint consensus, left
// automatically): +n adds a voter, ~n a learner, -n removes.
func (s *script) change(g multiraft.GroupID, pos []string, within int) string {
	lead, _ := s.c.leader(g)
	if lead == 0 {
		return "no leader"
	}
	var chs []multiraft.Change
	for _, w := range pos {
		id := s.node(w[1:])
		switch w[0] {
		case '+', '~':
			if nd := s.c.nodes[id]; !slices.Contains(nd.groups, g) {
				s.c.createGroup(g, []multiraft.NodeID{id}, nil)
			}
			k := multiraft.AddVoter
			if w[0] == '~' {
				k = multiraft.AddLearner
			}
			chs = append(chs, multiraft.Change{Kind: k, Node: id})
		case '-':
			chs = append(chs, multiraft.Change{Kind: multiraft.RemoveNode, Node: id})
		default:
			s.t.Fatalf("change: %q is not +n, ~n or -n", w)
		}
	}
	p, err := s.c.nodes[lead].host.ChangeMembershipAsync(g, chs...)
	if err != nil {
		return "error: " + err.Error()
	}
	if !s.c.await(p, within) {
		return "pending"
	}
	idx, err := p.Result()
	if err != nil {
		return "error: " + err.Error()
	}
	return fmt.Sprintf("index=%d", idx)
}
