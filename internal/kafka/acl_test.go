package kafka

import (
	"errors"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

const aclUsers = `
users:
  - {name: admin, password: admin-secret}
  - {name: carol, password: carol-secret}
  - name: sqs
    access_keys: [{id: AKIDEXAMPLE, secret: wJalrXUtnFEMI}]
    tokens: ["sl_clear_token"]
acls:
  - {user: admin, allow: [all], resources: ["*"]}
  - {user: carol, allow: [redrive], resources: ["queue:carol"]}
`

// TestACLsKadm: kadm's CreateACLs, DescribeACLs and DeleteACLs round trip
// through the users file, and what they grant or remove takes effect on
// the next request.
func TestACLsKadm(t *testing.T) {
	n := startAuthNode(t, aclUsers, Config{}, "logs-1")
	adm := kadm.NewClient(n.as(scram256("admin", "admin-secret")))
	ctx := testCtx(t, 30*time.Second)
	carol := n.as(scram256("carol", "carol-secret"), kgo.DisableIdempotentWrite())
	produce := func() error {
		return carol.ProduceSync(ctx, &kgo.Record{Topic: "logs-1", Value: []byte("x")}).FirstErr()
	}
	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("before the grant: %v", err)
	}

	b := kadm.NewACLs().Allow("User:carol").Topics("logs").ResourcePatternType(kadm.ACLPatternPrefixed).
		Operations(kadm.OpWrite, kadm.OpDescribe)
	created, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range created {
		if c.Err != nil {
			t.Fatalf("create %+v", c)
		}
	}
	f, err := auth.ReadFile(n.path)
	if err != nil {
		t.Fatal(err)
	}
	want := []auth.Rule{
		{User: "admin", Allow: []auth.Operation{auth.All}, Resources: []auth.Pattern{"*"}},
		{User: "carol", Allow: []auth.Operation{auth.Redrive}, Resources: []auth.Pattern{"queue:carol"}},
		{User: "carol", Allow: []auth.Operation{auth.Produce}, Resources: []auth.Pattern{"topic:logs*"}},
		{User: "carol", Allow: []auth.Operation{auth.Describe}, Resources: []auth.Pattern{"topic:logs*"}},
	}
	if !reflect.DeepEqual(f.ACLs, want) {
		t.Fatalf("file rules:\n%+v\nwant\n%+v", f.ACLs, want)
	}
	if f.User("carol").Password != "" || f.User("carol").SCRAMSHA256 == nil {
		t.Fatal("the rewritten file keeps a clear-text password")
	}
	// Other users' credentials survive the rewrite (a clear token hashed).
	if u := f.User("sqs"); u == nil || len(u.AccessKeys) != 1 || u.AccessKeys[0].Secret != "wJalrXUtnFEMI" ||
		len(u.Tokens) != 1 || u.Tokens[0] != auth.HashToken("sl_clear_token") {
		t.Fatalf("user sqs after the rewrite: %+v", u)
	}
	if fi, err := os.Stat(n.path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("users file mode: %v %v", fi.Mode(), err)
	}
	if err := produce(); err != nil {
		t.Fatalf("after the grant: %v", err)
	}
	// Created twice: nothing added.
	if _, err := adm.CreateACLs(ctx, b); err != nil {
		t.Fatal(err)
	}
	if f, _ := auth.ReadFile(n.path); len(f.ACLs) != 4 {
		t.Fatalf("%d rules after creating the same ACLs again", len(f.ACLs))
	}

	described, err := adm.DescribeACLs(ctx, kadm.NewACLs().Allow("User:carol").AllowHosts().AnyResource().
		ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny))
	if err != nil || len(described) != 1 || described[0].Err != nil {
		t.Fatalf("describe: %v %+v", err, described)
	}
	if got := len(described[0].Described); got != 2 {
		t.Fatalf("described %d ACLs of carol, want 2 (redrive on a queue has no Kafka form): %+v", got, described[0].Described)
	}
	for _, d := range described[0].Described {
		if d.Type != kmsg.ACLResourceTypeTopic || d.Name != "logs" || d.Pattern != kadm.ACLPatternPrefixed || d.Host != "*" {
			t.Fatalf("described %+v", d)
		}
	}

	deleted, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:carol").AllowHosts().Topics("logs").
		ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite))
	if err != nil || len(deleted) != 1 || len(deleted[0].Deleted) != 1 {
		t.Fatalf("delete: %v %+v", err, deleted)
	}
	if err := produce(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("after the delete: %v", err)
	}
	if f, _ := auth.ReadFile(n.path); len(f.ACLs) != 3 {
		t.Fatalf("rules after delete: %+v", f.ACLs)
	}

	// Only a principal that may alter the cluster edits ACLs.
	cadm := kadm.NewClient(n.as(scram256("carol", "carol-secret")))
	res, err := cadm.CreateACLs(ctx, kadm.NewACLs().Allow("User:carol").Clusters().Operations(kadm.OpAll))
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("carol creating ACLs: %v %+v", err, res)
	}
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	dreq.Operation, dreq.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dres, err := dreq.RequestWith(ctx, carol)
	if err != nil || dres.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("carol describing ACLs: %v %+v", err, dres)
	}
	// admin sees its "*" rule as Kafka's three wildcard resources.
	dres, err = dreq.RequestWith(ctx, n.as(scram256("admin", "admin-secret")))
	if err != nil || dres.ErrorCode != 0 {
		t.Fatalf("admin describing ACLs: %v %+v", err, dres)
	}
	var all []string
	for _, r := range dres.Resources {
		for _, a := range r.ACLs {
			if a.Principal == "User:admin" {
				all = append(all, r.ResourceType.String()+":"+r.ResourceName+":"+a.Operation.String())
			}
		}
	}
	if want := []string{"TOPIC:*:ALL", "GROUP:*:ALL", "CLUSTER:kafka-cluster:ALL"}; !reflect.DeepEqual(all, want) {
		t.Fatalf("admin's ACLs %q, want %q", all, want)
	}
}

func TestACLBindingErrors(t *testing.T) {
	ok := kmsg.NewCreateACLsRequestCreation()
	ok.ResourceType, ok.ResourceName, ok.Principal, ok.Host = kmsg.ACLResourceTypeTopic, "t", "User:u", "*"
	ok.Operation, ok.PermissionType = kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	if b, err := bindingOf(ok); err != nil || b != (binding{"u", "topic:t", auth.Consume, false}) {
		t.Fatalf("%+v %v", b, err)
	}
	for name, edit := range map[string]func(*kmsg.CreateACLsRequestCreation){
		"host":          func(c *kmsg.CreateACLsRequestCreation) { c.Host = "10.0.0.1" },
		"principal":     func(c *kmsg.CreateACLsRequestCreation) { c.Principal = "Group:x" },
		"transactional": func(c *kmsg.CreateACLsRequestCreation) { c.ResourceType = kmsg.ACLResourceTypeTransactionalId },
		"cluster name": func(c *kmsg.CreateACLsRequestCreation) {
			c.ResourceType, c.ResourceName = kmsg.ACLResourceTypeCluster, "x"
		},
		"op":        func(c *kmsg.CreateACLsRequestCreation) { c.Operation = kmsg.ACLOperationClusterAction },
		"perm":      func(c *kmsg.CreateACLsRequestCreation) { c.PermissionType = kmsg.ACLPermissionTypeAny },
		"star name": func(c *kmsg.CreateACLsRequestCreation) { c.ResourceName = "a*" },
		"prefix star": func(c *kmsg.CreateACLsRequestCreation) {
			c.ResourceName, c.ResourcePatternType = "*", kmsg.ACLResourcePatternTypePrefixed
		},
		"match": func(c *kmsg.CreateACLsRequestCreation) { c.ResourcePatternType = kmsg.ACLResourcePatternTypeMatch },
	} {
		c := ok
		edit(&c)
		if _, err := bindingOf(c); !errors.Is(err, errACL) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestWithoutBindings: a rule that loses some bindings is split so that
// the rest, including what Kafka cannot name, stay.
func TestWithoutBindings(t *testing.T) {
	rules := []auth.Rule{
		{User: "bob", Allow: []auth.Operation{auth.Produce, auth.Consume, auth.Redrive}, Resources: []auth.Pattern{"topic:a", "queue:q"}},
		{User: "admin", Allow: []auth.Operation{auth.All}, Resources: []auth.Pattern{"*"}},
		{User: "eve", Deny: []auth.Operation{auth.Consume}, Resources: []auth.Pattern{"group:g*"}},
	}
	got := withoutBindings(rules, []binding{
		{"bob", "topic:a", auth.Produce, false},
		{"admin", "cluster", auth.All, false},
		{"eve", "group:g*", auth.Consume, true},
	})
	want := []auth.Rule{
		{User: "bob", Allow: []auth.Operation{auth.Consume, auth.Redrive}, Resources: []auth.Pattern{"topic:a"}},
		{User: "bob", Allow: []auth.Operation{auth.Produce, auth.Consume, auth.Redrive}, Resources: []auth.Pattern{"queue:q"}},
		{User: "admin", Allow: []auth.Operation{auth.All}, Resources: []auth.Pattern{"queue:*"}},
		{User: "admin", Allow: []auth.Operation{auth.All}, Resources: []auth.Pattern{"topic:*"}},
		{User: "admin", Allow: []auth.Operation{auth.All}, Resources: []auth.Pattern{"group:*"}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got\n%+v\nwant\n%+v", got, want)
	}
}

// TestACLFilterMatch: Kafka's filter semantics, MATCH included.
func TestACLFilterMatch(t *testing.T) {
	name := func(s string) *string { return &s }
	lit := binding{"u", "topic:orders", auth.Produce, false}
	wild := binding{"u", "topic:*", auth.Produce, false}
	pre := binding{"u", "topic:ord*", auth.Produce, true}
	cl := binding{"*", "cluster", auth.Alter, false}
	any := aclFilter{rt: kmsg.ACLResourceTypeAny, pt: kmsg.ACLResourcePatternTypeAny, op: kmsg.ACLOperationAny, perm: kmsg.ACLPermissionTypeAny}
	cases := []struct {
		name string
		f    func(aclFilter) aclFilter
		want [4]bool // lit, wild, pre, cl
	}{
		{"any", func(f aclFilter) aclFilter { return f }, [4]bool{true, true, true, true}},
		{"literal orders", func(f aclFilter) aclFilter {
			f.pt, f.name = kmsg.ACLResourcePatternTypeLiteral, name("orders")
			return f
		}, [4]bool{true, false, false, false}},
		{"match orders", func(f aclFilter) aclFilter {
			f.rt, f.pt, f.name = kmsg.ACLResourceTypeTopic, kmsg.ACLResourcePatternTypeMatch, name("orders")
			return f
		}, [4]bool{true, true, true, false}},
		{"prefixed", func(f aclFilter) aclFilter { f.pt = kmsg.ACLResourcePatternTypePrefixed; return f }, [4]bool{false, false, true, false}},
		{"deny", func(f aclFilter) aclFilter { f.perm = kmsg.ACLPermissionTypeDeny; return f }, [4]bool{false, false, true, false}},
		{"user *", func(f aclFilter) aclFilter { f.prin = name("User:*"); return f }, [4]bool{false, false, false, true}},
		{"alter configs", func(f aclFilter) aclFilter { f.op = kmsg.ACLOperationAlterConfigs; return f }, [4]bool{false, false, false, true}},
		{"host", func(f aclFilter) aclFilter { f.host = name("10.1.1.1"); return f }, [4]bool{}},
		{"cluster", func(f aclFilter) aclFilter { f.rt = kmsg.ACLResourceTypeCluster; return f }, [4]bool{false, false, false, true}},
	}
	for _, c := range cases {
		f := c.f(any)
		for i, b := range []binding{lit, wild, pre, cl} {
			if got := f.matches(b); got != c.want[i] {
				t.Errorf("%s: binding %+v: got %v", c.name, b, got)
			}
		}
	}
}
