package auth

import (
	"fmt"
	"strings"
)

// Operation is what a principal does to a resource. Front-ends map their
// calls onto these: a Kafka Produce and an SQS SendMessage are both
// Produce; a Fetch, a ReceiveMessage, an ack, an offset commit are Consume.
type Operation string

const (
	Produce  Operation = "produce"  // send a message, produce a record
	Consume  Operation = "consume"  // receive, fetch, ack, nack, extend, commit offsets, join a group
	Create   Operation = "create"   // create a topic, queue or subscription
	Delete   Operation = "delete"   // delete one, purge a queue, delete records or a group
	Alter    Operation = "alter"    // change settings, partitions, ACLs, queue permissions
	Describe Operation = "describe" // see that it exists, its settings and stats
	Redrive  Operation = "redrive"  // move dead letters back
	All      Operation = "all"      // every operation
)

// operations lists every Operation a rule may name, with the aliases the
// SQS vocabulary brings (send, receive).
var operations = map[string]Operation{
	"produce": Produce, "send": Produce, "consume": Consume, "receive": Consume,
	"create": Create, "delete": Delete, "alter": Alter, "describe": Describe,
	"redrive": Redrive, "all": All,
}

// ParseOperation reads an operation name as a rule spells it.
func ParseOperation(s string) (Operation, error) {
	if op, ok := operations[strings.ToLower(strings.TrimSpace(s))]; ok {
		return op, nil
	}
	return "", fmt.Errorf("unknown operation %q (want produce, consume, create, delete, alter, describe, redrive or all)", s)
}

// Kind is the type of a resource.
type Kind string

const (
	Topic   Kind = "topic"
	Queue   Kind = "queue"
	Group   Kind = "group"   // a Kafka consumer group
	Cluster Kind = "cluster" // the broker itself: listing everything, cluster admin
)

// Resource is one thing a rule protects: a topic, queue or group by name,
// or the cluster (whose Name is ignored).
type Resource struct {
	Kind Kind
	Name string
}

func (r Resource) String() string {
	if r.Kind == Cluster {
		return string(Cluster)
	}
	return string(r.Kind) + ":" + r.Name
}

// Pattern is a rule's resource selector as the file spells it:
//
//   - everything
//     cluster         the cluster
//     topic:orders    one topic (queue:, group: likewise)
//     queue:emails*   every queue whose name starts with "emails"
//     topic:*         every topic
type Pattern string

// ParsePattern checks a selector's syntax.
func ParsePattern(s string) (Pattern, error) {
	s = strings.TrimSpace(s)
	if s == "*" || s == string(Cluster) {
		return Pattern(s), nil
	}
	kind, name, ok := strings.Cut(s, ":")
	if !ok || name == "" {
		return "", fmt.Errorf("resource %q: want *, cluster, or kind:name with kind topic, queue or group", s)
	}
	switch Kind(kind) {
	case Topic, Queue, Group:
	default:
		return "", fmt.Errorf("resource %q: unknown kind %q (want topic, queue or group)", s, kind)
	}
	if i := strings.IndexByte(name, '*'); i >= 0 && i != len(name)-1 {
		return "", fmt.Errorf("resource %q: '*' may only end a name (a prefix)", s)
	}
	return Pattern(s), nil
}

// Matches reports whether the selector covers r.
func (p Pattern) Matches(r Resource) bool {
	s := string(p)
	if s == "*" {
		return true
	}
	if s == string(Cluster) {
		return r.Kind == Cluster
	}
	kind, name, _ := strings.Cut(s, ":")
	if Kind(kind) != r.Kind {
		return false
	}
	if prefix, ok := strings.CutSuffix(name, "*"); ok {
		return strings.HasPrefix(r.Name, prefix)
	}
	return name == r.Name
}

// Rule grants (Allow) or refuses (Deny) operations on resources to one
// user, or to every authenticated user when User is "*". A Deny that
// matches wins over any Allow, as in Kafka's ACLs; with no matching Allow
// the answer is no.
type Rule struct {
	User      string      `yaml:"user"`
	Allow     []Operation `yaml:"allow,omitempty"`
	Deny      []Operation `yaml:"deny,omitempty"`
	Resources []Pattern   `yaml:"resources"`
	// Label marks a rule SQS AddPermission wrote (its Label), so that
	// RemovePermission removes exactly what it added; "" for rules
	// written by hand or by `sluice acl`.
	Label string `yaml:"label,omitempty"`
}

func (r Rule) validate() error {
	if r.User == "" {
		return fmt.Errorf("acl: user is required (a name, or * for every user)")
	}
	if len(r.Allow) == 0 && len(r.Deny) == 0 {
		return fmt.Errorf("acl for %s: name at least one operation in allow or deny", r.User)
	}
	for _, ops := range [][]Operation{r.Allow, r.Deny} {
		for _, op := range ops {
			if _, err := ParseOperation(string(op)); err != nil {
				return fmt.Errorf("acl for %s: %w", r.User, err)
			}
		}
	}
	if len(r.Resources) == 0 {
		return fmt.Errorf("acl for %s: name at least one resource", r.User)
	}
	for _, p := range r.Resources {
		if _, err := ParsePattern(string(p)); err != nil {
			return fmt.Errorf("acl for %s: %w", r.User, err)
		}
	}
	return nil
}

// normalize spells operations canonically (send -> produce), so matching
// compares constants.
func (r *Rule) normalize() {
	for _, ops := range [][]Operation{r.Allow, r.Deny} {
		for i, op := range ops {
			ops[i], _ = ParseOperation(string(op))
		}
	}
}

func (r Rule) covers(user string, res Resource) bool {
	if r.User != "*" && r.User != user {
		return false
	}
	for _, p := range r.Resources {
		if p.Matches(res) {
			return true
		}
	}
	return false
}

func hasOp(ops []Operation, op Operation) bool {
	for _, o := range ops {
		if o == op || o == All {
			return true
		}
	}
	return false
}

// decide applies rules to one request: a matching deny refuses, else a
// matching allow permits, else refused. Describe is implied by any other
// allowed operation on the same resource, as Kafka implies DESCRIBE from
// READ, WRITE, DELETE and ALTER: a producer may look up the topic it
// writes to.
func decide(rules []Rule, user string, op Operation, res Resource) bool {
	allowed := false
	for _, r := range rules {
		if !r.covers(user, res) {
			continue
		}
		if hasOp(r.Deny, op) {
			return false
		}
		if hasOp(r.Allow, op) || (op == Describe && len(r.Allow) > 0) {
			allowed = true
		}
	}
	return allowed
}

// decideSome reports whether some resource of kind is open to op for user:
// a matching allow names op on a pattern of that kind (or "*"), and no
// deny of op covers every resource of the kind ("*" or "kind:*"). A deny
// of a narrower pattern is not weighed against a broader allow: this is
// the coarse question Kafka's InitProducerId asks (KIP-679: WRITE on any
// topic), not a decision about one resource.
func decideSome(rules []Rule, user string, op Operation, kind Kind) bool {
	allowed := false
	for _, r := range rules {
		if r.User != "*" && r.User != user {
			continue
		}
		for _, p := range r.Resources {
			s := string(p)
			ofKind := s == "*" || strings.HasPrefix(s, string(kind)+":") || (kind == Cluster && s == string(Cluster))
			if !ofKind {
				continue
			}
			everything := s == "*" || s == string(kind)+":*" || (kind == Cluster && s == string(Cluster))
			if everything && hasOp(r.Deny, op) {
				return false
			}
			if hasOp(r.Allow, op) {
				allowed = true
			}
		}
	}
	return allowed
}
