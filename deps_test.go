package sluice_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestDependencyDirection keeps the layering of docs/architecture.md true:
// dependencies point down (front-ends -> broker -> queue/group -> storage -> vfs),
// the core never imports a network front-end or net/http, the public client never
// imports internal packages, and non-test code never imports "testing"
// (but for the test-support packages sluicetest and internal/testproc).
func TestDependencyDirection(t *testing.T) {
	const mod = "github.com/sluice-mq/sluice/"
	forbidden := map[string][]string{
		"internal/vfs":     {mod + "internal/", "net/http"},
		"internal/linger":  {mod + "internal/", "net/http"},
		"internal/storage": {mod + "internal/queue", mod + "internal/group", mod + "internal/broker", mod + "internal/api", mod + "internal/kafka", mod + "internal/sqs", mod + "internal/server", "net/http"},
		"internal/journal": {mod + "internal/queue", mod + "internal/group", mod + "internal/broker", mod + "internal/api", mod + "internal/kafka", mod + "internal/sqs", mod + "internal/server", "net/http"},
		"internal/queue":   {mod + "internal/broker", mod + "internal/storage", mod + "internal/api", mod + "internal/kafka", mod + "internal/sqs", mod + "internal/server", "net/http"},
		"internal/group":   {mod + "internal/broker", mod + "internal/storage", mod + "internal/api", mod + "internal/kafka", mod + "internal/sqs", mod + "internal/server", "net/http"},
		"internal/broker":  {mod + "internal/api", mod + "internal/kafka", mod + "internal/sqs", mod + "internal/server", "net/http"},
		"client":           {mod + "internal/"},
	}
	out, err := exec.Command("go", "list", "-json=ImportPath,Deps", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Deps       []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		seen++
		rel := strings.TrimPrefix(p.ImportPath, mod)
		for _, d := range p.Deps {
			if d == "testing" && !strings.HasPrefix(rel, "sluicetest") && rel != "internal/testproc" {
				t.Errorf("%s imports testing in non-test code", p.ImportPath)
			}
			for prefix, bans := range forbidden {
				if rel != prefix && !strings.HasPrefix(rel, prefix+"/") {
					continue
				}
				for _, b := range bans {
					if d == b || strings.HasPrefix(d, b) {
						t.Errorf("%s must not depend on %s", p.ImportPath, d)
					}
				}
			}
		}
	}
	if seen == 0 {
		t.Fatal("go list returned no packages")
	}
}
