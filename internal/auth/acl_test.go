package auth

import "testing"

func TestDecide(t *testing.T) {
	rules := mustRules(t, `
acls:
  - {user: billing, allow: [produce, consume], resources: ["topic:orders", "queue:emails*"]}
  - {user: billing, deny: [consume], resources: ["queue:emails-secret"]}
  - {user: admin, allow: [all], resources: ["*"]}
  - {user: "*", allow: [describe], resources: ["cluster"]}
  - {user: ops, allow: [send, receive], resources: ["queue:*"]}
`)
	q := func(n string) Resource { return Resource{Queue, n} }
	tp := func(n string) Resource { return Resource{Topic, n} }
	cases := []struct {
		user string
		op   Operation
		res  Resource
		want bool
	}{
		{"billing", Produce, tp("orders"), true},
		{"billing", Consume, tp("orders"), true},
		{"billing", Describe, tp("orders"), true}, // implied by produce/consume
		{"billing", Delete, tp("orders"), false},
		{"billing", Produce, tp("orders2"), false}, // exact name, not a prefix
		{"billing", Produce, q("emails"), true},
		{"billing", Produce, q("emails-eu"), true},
		{"billing", Consume, q("emails-secret"), false}, // deny wins
		{"billing", Produce, q("emails-secret"), true},  // deny names consume only
		{"billing", Produce, q("mail"), false},
		{"billing", Produce, Resource{Group, "orders"}, false}, // kind must match
		{"billing", Describe, Resource{Kind: Cluster}, true},   // "*" user rule
		{"admin", Redrive, q("anything"), true},
		{"admin", Alter, Resource{Kind: Cluster}, true},
		{"ops", Produce, q("x"), true}, // send is produce
		{"ops", Consume, q("x"), true}, // receive is consume
		{"ops", Produce, tp("x"), false},
		{"nobody", Describe, tp("orders"), false},
		{"nobody", Describe, Resource{Kind: Cluster}, true},
	}
	for _, c := range cases {
		if got := decide(rules, c.user, c.op, c.res); got != c.want {
			t.Errorf("%s %s %s = %v, want %v", c.user, c.op, c.res, got, c.want)
		}
	}
}

func TestParsePatternRefuses(t *testing.T) {
	for _, s := range []string{"", "orders", "topic:", "stream:x", "topic:a*b", "queue:**x"} {
		if _, err := ParsePattern(s); err == nil {
			t.Errorf("ParsePattern(%q) accepted", s)
		}
	}
	for _, s := range []string{"*", "cluster", "topic:*", "group:g1", "queue:emails*"} {
		if _, err := ParsePattern(s); err != nil {
			t.Errorf("ParsePattern(%q): %v", s, err)
		}
	}
}

func mustRules(t *testing.T, y string) []Rule {
	t.Helper()
	f, err := Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return f.ACLs
}

func TestDecideSome(t *testing.T) {
	rules := mustRules(t, `
acls:
  - {user: writer, allow: [produce], resources: ["topic:orders*"]}
  - {user: reader, allow: [consume], resources: ["topic:orders"]}
  - {user: admin, allow: [all], resources: ["*"]}
  - {user: fenced, allow: [produce], resources: ["topic:a"]}
  - {user: fenced, deny: [produce], resources: ["topic:*"]}
  - {user: idem, allow: [produce], resources: ["cluster"]}
  - {user: q, allow: [produce], resources: ["queue:x"]}
`)
	cases := []struct {
		user string
		op   Operation
		kind Kind
		want bool
	}{
		{"writer", Produce, Topic, true},
		{"reader", Produce, Topic, false},
		{"admin", Produce, Topic, true},
		{"fenced", Produce, Topic, false}, // a deny of every topic wins
		{"idem", Produce, Cluster, true},
		{"idem", Produce, Topic, false},
		{"q", Produce, Topic, false}, // a queue is not a topic
		{"nobody", Produce, Topic, false},
	}
	for _, c := range cases {
		if got := decideSome(rules, c.user, c.op, c.kind); got != c.want {
			t.Errorf("%s %s some %s: got %v, want %v", c.user, c.op, c.kind, got, c.want)
		}
	}
	var nilStore *Store
	if !nilStore.AllowedSome("", Produce, Topic) {
		t.Error("a nil store refused")
	}
}
