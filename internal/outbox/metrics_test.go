package outbox

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every outbox metric the shipped alert rules name is one the relay serves
// (the CDC relay's set, which adds the slot lag), so a rename cannot leave
// an alert that never fires.
func TestAlertRulesNameServedMetrics(t *testing.T) {
	b, err := os.ReadFile("../../deploy/prometheus/sluice-outbox-alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := newMetrics("outbox", "queue:q")
	m.slotLag.Store(0)
	var served strings.Builder
	if _, err := m.WriteTo(&served); err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`sluice_outbox_[a-z_]+`).FindAllString(string(b), -1)
	if len(names) < 3 {
		t.Fatalf("only %d metric names in the alert rules: the file's shape changed", len(names))
	}
	for _, n := range names {
		if !strings.Contains(served.String(), "\n"+n+"{") {
			t.Errorf("the alert rules name %s, which the relay does not serve", n)
		}
	}
}

// docs/outbox.md shows the migration of every database as the relay's
// Schema has it, so the documented table is the one the relay reads.
func TestDocsShowTheSchema(t *testing.T) {
	b, err := os.ReadFile("../../docs/outbox.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, driver := range []string{"postgres", "mysql", "sqlite"} {
		for _, stmt := range Schema(driver, "outbox") {
			if !strings.Contains(string(b), stmt) {
				t.Errorf("docs/outbox.md lacks the %s statement:\n%s", driver, stmt)
			}
		}
	}
}
