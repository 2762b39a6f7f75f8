package sluice_test

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/sluice-mq/sluice/"

// goPackage is what go list reports of one package of the module.
type goPackage struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
	Deps                               []string // transitive, of non-test code
	rel                                string   // ImportPath without mod
	directAll                          []string // Imports, TestImports and XTestImports
}

func listPackages(t *testing.T) []goPackage {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports,Deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p goPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		p.rel = strings.TrimPrefix(p.ImportPath, mod)
		p.directAll = slices.Concat(p.Imports, p.TestImports, p.XTestImports)
		pkgs = append(pkgs, p)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list returned no packages")
	}
	return pkgs
}

// under reports whether rel is the package dir or one below it.
func under(rel, dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }

// banned reports whether import path d is one of bans (each a package and
// everything below it, or for a module prefix ending in "/" everything in it).
func banned(d string, bans []string) bool {
	for _, b := range bans {
		if d == b || strings.HasPrefix(d, strings.TrimSuffix(b, "/")+"/") {
			return true
		}
	}
	return false
}

// TestDependencyDirection keeps the layering of docs/architecture.md true
// for non-test code, transitively (go list's Deps): dependencies point down
// (cmd -> node -> server and front-ends -> broker -> queue/group and
// journal -> storage -> vfs), the core never imports a front-end, the server, the node
// or net/http, the server imports no front-end, the serving binary links no
// client library of another protocol, the public client never imports
// internal packages but the record batch format (allowedUnder), the console reaches the broker only through the public
// client, internal/cluster never imports the broker or anything above it,
// internal/telemetry imports nothing of the module, and
// non-test code never imports "testing" (but for the
// test-support packages sluicetest, internal/testproc and internal/testrace).
func TestDependencyDirection(t *testing.T) {
	frontEnds := []string{mod + "internal/api", mod + "internal/kafka", mod + "internal/sqs"}
	above := append(slices.Clone(frontEnds), mod+"internal/server", mod+"internal/node")
	forbidden := map[string][]string{
		"internal/vfs":      {mod + "internal/", "net/http"},
		"internal/linger":   {mod + "internal/", "net/http"},
		"internal/storage":  append([]string{mod + "internal/queue", mod + "internal/group", mod + "internal/broker", "net/http"}, above...),
		"internal/journal":  append([]string{mod + "internal/queue", mod + "internal/group", mod + "internal/broker", "net/http"}, above...),
		"internal/producer": append([]string{mod + "internal/queue", mod + "internal/group", mod + "internal/broker", "net/http"}, above...),
		// The disk guard sees only the file system, never what is stored.
		"internal/diskguard": {mod + "internal/storage", mod + "internal/journal", mod + "internal/queue", mod + "internal/group",
			mod + "internal/broker", "net/http", mod + "internal/api", mod + "internal/kafka", mod + "internal/sqs", mod + "internal/server", mod + "internal/node"},
		// Who a client is and what it may do: shared by the front-ends,
		// knowing none of them, nor the core they protect.
		"internal/auth":  append([]string{mod + "internal/broker", mod + "internal/storage", "net/http"}, above...),
		"internal/queue": append([]string{mod + "internal/broker", mod + "internal/storage", "net/http"}, above...),
		"internal/group": append([]string{mod + "internal/broker", mod + "internal/storage", "net/http"}, above...),
		// The transaction coordinator: a state machine with its own small
		// file; it never appends to a partition or touches a group itself.
		"internal/txn": append([]string{mod + "internal/broker", mod + "internal/storage", mod + "internal/group",
			mod + "internal/journal", "net/http"}, above...),
		"internal/broker": append([]string{"net/http"}, above...),
		"internal/server": append(slices.Clone(frontEnds), mod+"internal/node"),
		// Replication sits between the broker and storage: it knows groups and entries,
		// never topics, queues or a protocol (docs/cluster.md).
		"internal/cluster": append([]string{mod + "internal/broker"}, above...),
		// (but internal/batch, below: allowedUnder)
		"client": {mod + "internal/"},
		// The web console is a client of the native API like any other:
		// it reaches the broker only through the public client.
		"internal/console": append([]string{mod + "internal/broker", mod + "internal/queue", mod + "internal/storage", mod + "internal/auth"}, above...),
		// The outbox relay is a client of the broker (docs/outbox.md): it
		// publishes through the public client and links nothing of the core.
		"internal/outbox": {mod + "internal/"},
		// Raft storage: below the broker, beside storage; it decides no
		// Raft logic and knows no state machine.
		"internal/cluster/raftstore": append([]string{mod + "internal/broker", mod + "internal/queue", mod + "internal/group", mod + "internal/journal", "net/http",
			mod + "internal/cluster/multiraft", mod + "internal/cluster/engine"}, above...),
		// The host defines its storage interfaces and never depends on a concrete storage:
		// internal/cluster/engine, above both, is where the host meets raftstore.
		"internal/cluster/multiraft": {mod + "internal/cluster/raftstore", mod + "internal/cluster/engine", mod + "internal/storage"},
		// The replicated queue is a state machine over the host: it may import the queue's
		// cursor and the cluster packages, never the broker or anything above it.
		"internal/cluster/replqueue": append([]string{mod + "internal/broker", mod + "internal/storage"}, above...),
		// The catalog is the metadata group's state machine: topics and placement as values,
		// never the broker topics or groups they describe (the node glue creates those).
		"internal/cluster/meta": append([]string{mod + "internal/broker", mod + "internal/storage", mod + "internal/queue",
			mod + "internal/group", mod + "internal/journal", "net/http"}, above...),
		// The replicated partition hands committed batches to the broker's log through its
		// own Log interface: it never imports the broker or anything above it.
		"internal/cluster/replpart": append([]string{mod + "internal/broker"}, above...),
		// The record batch format, shared by the core, the Kafka front-end and
		// the public client: a leaf.
		"internal/batch": {mod + "internal/"},
		// The shared decoder owns no format and knows nothing of the module.
		"internal/wire": {mod + "internal/"},
		// Tracing is a leaf the front-ends call with plain values: it knows
		// no broker, no protocol, nothing of the module (docs/architecture.md).
		"internal/telemetry": {mod + "internal/"},
		// The serving binary: the load generator (cmd/sluice-bench) and the
		// interop tests bring these; `sluice serve` must not link them.
		"cmd/sluice": {"github.com/aws/", "github.com/twmb/franz-go/pkg/kgo", "github.com/twmb/franz-go/pkg/kadm", mod + "bench/",
			mod + "internal/cluster/memnet", mod + "internal/cluster/faultproxy", mod + "internal/telemetry/otlptest"},
	}
	for _, p := range listPackages(t) {
		for _, d := range p.Deps {
			if d == "testing" && !under(p.rel, "sluicetest") && p.rel != "internal/testproc" && p.rel != "internal/testrace" {
				t.Errorf("%s imports testing in non-test code", p.ImportPath)
			}
		}
		for dir, bans := range forbidden {
			if !under(p.rel, dir) {
				continue
			}
			var bad []string
			for _, d := range p.Deps {
				if banned(d, bans) && !banned(d, allowedUnder[dir]) {
					bad = append(bad, d)
				}
			}
			if len(bad) > 0 {
				t.Errorf("%s must not depend, directly or through another package, on %s%s",
					p.ImportPath, strings.Join(bad[:min(len(bad), 3)], ", "), more(len(bad)-3))
			}
		}
	}
}

// allowedUnder lifts a ban of forbidden for one package. The public client
// builds record batches for the Publish stream (PublisherOptions
// .RecordBatches) with the server's own encoder: one wire format, one
// implementation; internal/batch is a leaf that imports nothing of the
// module (its own rule in forbidden), only the standard library and the
// compression codecs.
var allowedUnder = map[string][]string{
	"client":          {mod + "internal/batch"},
	"internal/outbox": {mod + "internal/batch"}, // through the client
}

func more(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n)
}

// TestFrontEndsImportOnlyTheBroker: the protocol front-ends reach the core
// through internal/broker alone (and internal/batch where a wire format
// needs it), never the state machines or storage beneath it, and never one
// another: what two front-ends share belongs in the broker. These are
// direct imports (every front-end depends on storage through the broker),
// tests included, so a test cannot reach around the broker either.
func TestFrontEndsImportOnlyTheBroker(t *testing.T) {
	frontEnds := []string{"internal/api", "internal/kafka", "internal/sqs"}
	below := []string{mod + "internal/storage", mod + "internal/journal", mod + "internal/group", mod + "internal/queue", mod + "internal/node"}
	for _, p := range listPackages(t) {
		for _, fe := range frontEnds {
			if !under(p.rel, fe) {
				continue
			}
			bans := slices.Clone(below)
			for _, other := range frontEnds {
				if other != fe {
					bans = append(bans, mod+other)
				}
			}
			for _, d := range p.directAll {
				if banned(d, bans) {
					t.Errorf("front-end %s imports %s: go through internal/broker", p.ImportPath, d)
				}
			}
		}
	}
}

// TestOnlyCommandsImportTheNode: internal/node assembles everything, so
// nothing it assembles may import it back; only the binaries and
// sluicetest (which runs the production assembly in users' tests) do.
func TestOnlyCommandsImportTheNode(t *testing.T) {
	for _, p := range listPackages(t) {
		if under(p.rel, "cmd") || under(p.rel, "sluicetest") || under(p.rel, "internal/node") {
			continue
		}
		if slices.Contains(p.directAll, mod+"internal/node") {
			t.Errorf("%s imports internal/node; only cmd/ and sluicetest may", p.ImportPath)
		}
	}
}
