package group

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// harness drives a Coordinator from script commands on a fake clock.
// Members are named by aliases (m1, m2, ...) used as client ids, so
// generated member ids read "m1-1"; the harness remembers each alias's
// member id and generation from the answers it receives.
//
//	join ALIAS [group=g] [mode=leader|broker] [protocols=range,...] [topics=a,b]
//	     [session=10s] [rebalance=30s] [instance=I] [v4] [fresh] [meta=X]
//	sync ALIAS [gen=N] [member=ID] [assign=ALIAS:bytes,...]
//	heartbeat ALIAS [gen=N] [member=ID]
//	leave ALIAS... | leave instance=I
//	commit ALIAS|- [gen=N] [member=ID] [group=g] [meta=X] topic/partition=offset...
//	reset GROUP topic/partition=offset...
//	deleteoffsets GROUP topic/partition...
//	tick +DURATION | partitions topic=N | fetch GROUP | describe GROUP
//	list | delete GROUP | deadline | restart
type harness struct {
	c       *Coordinator
	now     time.Time
	cfg     Config
	alias   map[string]*aliasState
	tickets map[Ticket]string
	journal [][]byte // every event, encoded, as the broker would journal it
	topics  map[string]int32
}

type aliasState struct {
	memberID, group, instance string
	gen                       int32
}

func newHarness() *harness {
	cfg := Config{Incarnation: ""}
	return &harness{c: New(cfg), cfg: cfg, now: epoch, alias: map[string]*aliasState{},
		tickets: map[Ticket]string{}, topics: map[string]int32{}}
}

// args splits "k=v" words into a map and leaves the rest positional.
func args(words []string) (pos []string, kv map[string]string) {
	kv = map[string]string{}
	for _, w := range words {
		if k, v, ok := strings.Cut(w, "="); ok && !strings.Contains(k, "/") {
			kv[k] = v
		} else {
			pos = append(pos, w)
			kv[w] = "" // bare flags such as v4 and fresh
		}
	}
	return pos, kv
}

func (h *harness) run(t *testing.T, cmd string) string {
	words := strings.Fields(cmd)
	pos, kv := args(words[1:])
	switch words[0] {
	case "join":
		return h.join(t, pos[0], kv)
	case "sync":
		return h.sync(t, pos[0], kv)
	case "heartbeat":
		a := h.get(pos[0])
		err := h.c.Heartbeat(h.now, HeartbeatRequest{Group: a.group, MemberID: memberID(a, kv), InstanceID: instanceID(a, kv), Generation: h.gen(t, a, kv)})
		return errString(err)
	case "leave":
		return h.leave(pos, kv)
	case "commit":
		return h.commit(t, pos, kv)
	case "deleteoffsets":
		return h.deleteOffsets(t, pos)
	case "reset":
		out, err := h.c.ResetOffsets(h.now, pos[0], parseOffsets(t, pos[1:], ""))
		return h.output(out) + errString(err)
	case "tick":
		d, err := time.ParseDuration(strings.TrimPrefix(pos[0], "+"))
		if err != nil {
			t.Fatal(err)
		}
		h.now = h.now.Add(d)
		return fmt.Sprintf("now +%s\n", h.now.Sub(epoch)) + h.output(h.c.Tick(h.now)) + h.states()
	case "partitions":
		return h.partitions(t, kv)
	case "fetch":
		return h.fetch(pos[0])
	case "describe":
		return h.describe(pos[0])
	case "list":
		var b strings.Builder
		for _, s := range h.c.List() {
			fmt.Fprintf(&b, "%s %s %q\n", s.Group, s.State, s.ProtocolType)
		}
		return b.String() + "ok"
	case "delete":
		out, err := h.c.Delete(pos[0])
		return h.output(out) + errString(err)
	case "deadline":
		d, ok := h.c.NextDeadline()
		if !ok {
			return "none"
		}
		return fmt.Sprintf("+%s", d.Sub(epoch))
	case "restart":
		return h.restart(t)
	}
	t.Fatalf("unknown command %q", cmd)
	return ""
}

func (h *harness) get(alias string) *aliasState {
	if h.alias[alias] == nil {
		h.alias[alias] = &aliasState{group: "g"}
	}
	return h.alias[alias]
}

func (h *harness) gen(t *testing.T, a *aliasState, kv map[string]string) int32 {
	if s, ok := kv["gen"]; ok {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		return int32(n)
	}
	return a.gen
}

// memberID is the alias's member id unless the command names one with
// member=ID (to act as a member that was replaced or expired).
func memberID(a *aliasState, kv map[string]string) string {
	if id, ok := kv["member"]; ok {
		return id
	}
	return a.memberID
}

func instanceID(a *aliasState, kv map[string]string) string {
	if id, ok := kv["instance"]; ok {
		return id
	}
	return a.instance
}

func duration(t *testing.T, kv map[string]string, key string, def time.Duration) time.Duration {
	s, ok := kv[key]
	if !ok {
		return def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

func (h *harness) join(t *testing.T, alias string, kv map[string]string) string {
	a := h.get(alias)
	if g, ok := kv["group"]; ok {
		a.group = g
	}
	if _, ok := kv["fresh"]; ok {
		a.memberID = ""
	}
	a.instance = kv["instance"]
	req := JoinRequest{
		Group: a.group, MemberID: a.memberID, InstanceID: a.instance, ClientID: alias,
		ProtocolType: "consumer", Topics: split(kv["topics"]),
		SessionTimeout:   duration(t, kv, "session", 10*time.Second),
		RebalanceTimeout: duration(t, kv, "rebalance", 30*time.Second),
	}
	_, req.RequireKnownMemberID = kv["v4"]
	if kv["mode"] == "broker" {
		req.Mode = BrokerAssigns
	}
	protocols := kv["protocols"]
	if protocols == "" {
		protocols = "range"
	}
	for _, p := range split(protocols) {
		req.Protocols = append(req.Protocols, Protocol{Name: p, Metadata: []byte(alias + kv["meta"])})
	}
	tk, out := h.c.Join(h.now, req)
	h.tickets[tk] = alias
	s := h.output(out)
	if !slices.ContainsFunc(out.Joins, func(r JoinResult) bool { return r.Ticket == tk }) {
		s = fmt.Sprintf("join t%d %s: waiting\n", tk, alias) + s
	}
	return s + h.state(a.group)
}

func (h *harness) sync(t *testing.T, alias string, kv map[string]string) string {
	a := h.get(alias)
	req := SyncRequest{Group: a.group, MemberID: memberID(a, kv), InstanceID: instanceID(a, kv), Generation: h.gen(t, a, kv)}
	if s, ok := kv["assign"]; ok {
		req.Assignments = map[string][]byte{}
		for _, pair := range split(s) {
			who, what, _ := strings.Cut(pair, ":")
			req.Assignments[h.get(who).memberID] = []byte(what)
		}
	}
	tk, out := h.c.Sync(h.now, req)
	h.tickets[tk] = alias
	s := h.output(out)
	if !slices.ContainsFunc(out.Syncs, func(r SyncResult) bool { return r.Ticket == tk }) {
		s = fmt.Sprintf("sync t%d %s: waiting\n", tk, alias) + s
	}
	return s + h.state(a.group)
}

func (h *harness) leave(pos []string, kv map[string]string) string {
	var refs []MemberRef
	group := "g"
	for _, alias := range pos {
		a := h.get(alias)
		group = a.group
		refs = append(refs, MemberRef{MemberID: a.memberID, InstanceID: a.instance})
	}
	if inst, ok := kv["instance"]; ok {
		refs = append(refs, MemberRef{InstanceID: inst})
	}
	errs, out := h.c.Leave(h.now, group, refs)
	var b strings.Builder
	for i, err := range errs {
		fmt.Fprintf(&b, "leave %d: %s", i, errString(err))
	}
	return b.String() + h.output(out) + h.state(group)
}
