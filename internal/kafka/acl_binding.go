package kafka

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/auth"
)

// Kafka ACL bindings over the users file's rules (29_describe_acls.go,
// 30_create_acls.go, 31_delete_acls.go).
//
// A rule grants or refuses operations on resource patterns to a user; a
// Kafka binding is one (resource, pattern type, principal, host,
// operation, permission). A rule is shown as the cross product of its
// operations and patterns that Kafka can name:
//
//	topic:orders   TOPIC orders LITERAL      topic:ord*  TOPIC ord PREFIXED
//	topic:*        TOPIC * LITERAL (Kafka's wildcard)    group: likewise
//	cluster        CLUSTER kafka-cluster LITERAL
//	*              TOPIC *, GROUP *, CLUSTER kafka-cluster (and queue:*, not shown)
//
//	produce WRITE  consume READ  create CREATE  delete DELETE  alter ALTER
//	describe DESCRIBE  all ALL   (redrive and queue: patterns have no Kafka form)
//
// Kafka's DESCRIBE_CONFIGS, ALTER_CONFIGS and IDEMPOTENT_WRITE are stored
// as describe, alter and produce, and shown so afterwards. The principal
// is "User:name" ("User:*" every user); the host is always "*" (rules
// match principals, not addresses).

// clusterName is the only name Kafka gives the cluster resource.
const clusterName = "kafka-cluster"

// binding is one Kafka ACL in sluice's terms.
type binding struct {
	user    string // a name, or "*"
	pattern string // one auth.Pattern that has a Kafka form
	op      auth.Operation
	deny    bool
}

// kafkaPatterns splits a rule's pattern into the ones Kafka can name,
// and says whether something Kafka cannot name (queues) remains.
func kafkaPatterns(p auth.Pattern) (named []string, rest []string) {
	s := string(p)
	switch {
	case s == "*":
		return []string{"topic:*", "group:*", string(auth.Cluster)}, []string{"queue:*"}
	case s == string(auth.Cluster), strings.HasPrefix(s, "topic:"), strings.HasPrefix(s, "group:"):
		return []string{s}, nil
	}
	return nil, []string{s}
}

var opToKafka = map[auth.Operation]kmsg.ACLOperation{
	auth.Produce: kmsg.ACLOperationWrite, auth.Consume: kmsg.ACLOperationRead,
	auth.Create: kmsg.ACLOperationCreate, auth.Delete: kmsg.ACLOperationDelete,
	auth.Alter: kmsg.ACLOperationAlter, auth.Describe: kmsg.ACLOperationDescribe,
	auth.All: kmsg.ACLOperationAll,
}

var opFromKafka = map[kmsg.ACLOperation]auth.Operation{
	kmsg.ACLOperationWrite: auth.Produce, kmsg.ACLOperationRead: auth.Consume,
	kmsg.ACLOperationCreate: auth.Create, kmsg.ACLOperationDelete: auth.Delete,
	kmsg.ACLOperationAlter: auth.Alter, kmsg.ACLOperationDescribe: auth.Describe,
	kmsg.ACLOperationAll: auth.All, kmsg.ACLOperationDescribeConfigs: auth.Describe,
	kmsg.ACLOperationAlterConfigs: auth.Alter, kmsg.ACLOperationIdempotentWrite: auth.Produce,
}

// bindings lists the Kafka-visible bindings of rules, in file order.
func bindings(rules []auth.Rule) []binding {
	var out []binding
	for _, r := range rules {
		out = append(out, ruleBindings(r)...)
	}
	return out
}

func ruleBindings(r auth.Rule) []binding {
	var out []binding
	for _, p := range r.Resources {
		named, _ := kafkaPatterns(p)
		for _, np := range named {
			for _, op := range r.Allow {
				if _, ok := opToKafka[op]; ok {
					out = append(out, binding{r.User, np, op, false})
				}
			}
			for _, op := range r.Deny {
				if _, ok := opToKafka[op]; ok {
					out = append(out, binding{r.User, np, op, true})
				}
			}
		}
	}
	return out
}

// kafkaResource is a binding's resource as Kafka names it.
func (b binding) kafkaResource() (kmsg.ACLResourceType, string, kmsg.ACLResourcePatternType) {
	if b.pattern == string(auth.Cluster) {
		return kmsg.ACLResourceTypeCluster, clusterName, kmsg.ACLResourcePatternTypeLiteral
	}
	kind, name, _ := strings.Cut(b.pattern, ":")
	rt := kmsg.ACLResourceTypeTopic
	if kind == string(auth.Group) {
		rt = kmsg.ACLResourceTypeGroup
	}
	if prefix, ok := strings.CutSuffix(name, "*"); ok && prefix != "" {
		return rt, prefix, kmsg.ACLResourcePatternTypePrefixed
	}
	return rt, name, kmsg.ACLResourcePatternTypeLiteral
}

func (b binding) principal() string { return "User:" + b.user }

func (b binding) permission() kmsg.ACLPermissionType {
	if b.deny {
		return kmsg.ACLPermissionTypeDeny
	}
	return kmsg.ACLPermissionTypeAllow
}

// errACL is a binding or filter sluice cannot express (INVALID_REQUEST).
var errACL = errors.New("invalid ACL")

// bindingOf reads a CreateAcls creation.
func bindingOf(c kmsg.CreateACLsRequestCreation) (binding, error) {
	user, err := userOf(c.Principal)
	if err != nil {
		return binding{}, err
	}
	if c.Host != "*" {
		return binding{}, fmt.Errorf("%w: host %q: sluice's rules match principals only; use host *", errACL, c.Host)
	}
	op, ok := opFromKafka[c.Operation]
	if !ok {
		return binding{}, fmt.Errorf("%w: operation %s has no sluice equivalent", errACL, c.Operation)
	}
	var deny bool
	switch c.PermissionType {
	case kmsg.ACLPermissionTypeAllow:
	case kmsg.ACLPermissionTypeDeny:
		deny = true
	default:
		return binding{}, fmt.Errorf("%w: permission %s: want ALLOW or DENY", errACL, c.PermissionType)
	}
	pattern, err := patternOf(c.ResourceType, c.ResourceName, c.ResourcePatternType)
	if err != nil {
		return binding{}, err
	}
	return binding{user, pattern, op, deny}, nil
}

func userOf(principal string) (string, error) {
	user, ok := strings.CutPrefix(principal, "User:")
	if !ok || user == "" || strings.ContainsAny(user, "\n") || (strings.Contains(user, "*") && user != "*") {
		return "", fmt.Errorf("%w: principal %q: want User:name or User:*", errACL, principal)
	}
	return user, nil
}

func patternOf(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType) (string, error) {
	var kind auth.Kind
	switch rt {
	case kmsg.ACLResourceTypeTopic:
		kind = auth.Topic
	case kmsg.ACLResourceTypeGroup:
		kind = auth.Group
	case kmsg.ACLResourceTypeCluster:
		if name != clusterName || pt != kmsg.ACLResourcePatternTypeLiteral {
			return "", fmt.Errorf("%w: the cluster resource is LITERAL %q", errACL, clusterName)
		}
		return string(auth.Cluster), nil
	default:
		return "", fmt.Errorf("%w: resource type %s is not supported (TOPIC, GROUP, CLUSTER)", errACL, rt)
	}
	if name == "" || (strings.Contains(name, "*") && name != "*") {
		return "", fmt.Errorf("%w: resource name %q", errACL, name)
	}
	switch pt {
	case kmsg.ACLResourcePatternTypeLiteral:
		if name == "*" {
			return string(kind) + ":*", nil
		}
		return string(kind) + ":" + name, nil
	case kmsg.ACLResourcePatternTypePrefixed:
		if name == "*" {
			return "", fmt.Errorf("%w: a PREFIXED name cannot be *", errACL)
		}
		return string(kind) + ":" + name + "*", nil
	}
	return "", fmt.Errorf("%w: pattern type %s: want LITERAL or PREFIXED", errACL, pt)
}

// aclFilter is a DescribeAcls request or a DeleteAcls filter.
type aclFilter struct {
	rt   kmsg.ACLResourceType
	name *string
	pt   kmsg.ACLResourcePatternType
	prin *string
	host *string
	op   kmsg.ACLOperation
	perm kmsg.ACLPermissionType
}

// matches is Kafka's AclBindingFilter.matches, over sluice's bindings.
func (f aclFilter) matches(b binding) bool {
	rt, name, pt := b.kafkaResource()
	if f.rt != kmsg.ACLResourceTypeAny && f.rt != rt {
		return false
	}
	if !f.matchesName(name, pt) {
		return false
	}
	if f.prin != nil && *f.prin != b.principal() {
		return false
	}
	if f.host != nil && *f.host != "*" {
		return false
	}
	if f.op != kmsg.ACLOperationAny {
		want, ok := opFromKafka[f.op]
		if !ok || want != b.op {
			return false
		}
	}
	return f.perm == kmsg.ACLPermissionTypeAny || f.perm == b.permission()
}

func (f aclFilter) matchesName(name string, pt kmsg.ACLResourcePatternType) bool {
	switch f.pt {
	case kmsg.ACLResourcePatternTypeAny:
		return f.name == nil || *f.name == name
	case kmsg.ACLResourcePatternTypeMatch:
		// Every binding that applies to the named resource.
		if f.name == nil {
			return true
		}
		if pt == kmsg.ACLResourcePatternTypeLiteral {
			return name == *f.name || name == "*"
		}
		return strings.HasPrefix(*f.name, name)
	}
	return f.pt == pt && (f.name == nil || *f.name == name)
}

// validFilter refuses what Kafka refuses in a filter.
func (f aclFilter) valid() error {
	switch {
	case f.rt == kmsg.ACLResourceTypeUnknown, f.pt == kmsg.ACLResourcePatternTypeUnknown,
		f.op == kmsg.ACLOperationUnknown, f.perm == kmsg.ACLPermissionTypeUnknown:
		return fmt.Errorf("%w: filter has an UNKNOWN field", errACL)
	}
	return nil
}

// withoutBindings returns rules with the bindings in gone removed: a rule
// none of whose bindings is gone stays as written; one that lost some is
// split per pattern (and "*" into its Kafka-named parts and queue:*), each
// keeping the operations not removed.
func withoutBindings(rules []auth.Rule, gone []binding) []auth.Rule {
	var out []auth.Rule
	for _, r := range rules {
		if !slices.ContainsFunc(ruleBindings(r), func(b binding) bool { return slices.Contains(gone, b) }) {
			out = append(out, r)
			continue
		}
		for _, p := range r.Resources {
			named, rest := kafkaPatterns(p)
			whole := auth.Rule{User: r.User, Allow: r.Allow, Deny: r.Deny, Resources: []auth.Pattern{p}}
			if !slices.ContainsFunc(ruleBindings(whole), func(b binding) bool { return slices.Contains(gone, b) }) {
				out = append(out, whole)
				continue
			}
			for _, sp := range rest {
				out = append(out, auth.Rule{User: r.User, Allow: r.Allow, Deny: r.Deny, Resources: []auth.Pattern{auth.Pattern(sp)}})
			}
			for _, sp := range named {
				keep := func(ops []auth.Operation, deny bool) []auth.Operation {
					var k []auth.Operation
					for _, op := range ops {
						if !slices.Contains(gone, binding{r.User, sp, op, deny}) {
							k = append(k, op)
						}
					}
					return k
				}
				nr := auth.Rule{User: r.User, Allow: keep(r.Allow, false), Deny: keep(r.Deny, true), Resources: []auth.Pattern{auth.Pattern(sp)}}
				if len(nr.Allow)+len(nr.Deny) > 0 {
					out = append(out, nr)
				}
			}
		}
	}
	return out
}
