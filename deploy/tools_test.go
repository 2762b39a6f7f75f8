package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// need returns the path of a tool the test needs, failing (not skipping)
// when it is missing, as the interop tests do: scripts/test-deps.sh
// installs it, and a check that silently does not run checks nothing.
func need(t *testing.T, tool, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(tool)
	if err != nil {
		t.Fatalf("%s is not installed (Debian package %s): run scripts/test-deps.sh, as root or with sudo", tool, pkg)
	}
	return path
}

// The systemd unit passes systemd-analyze verify: every directive known,
// every value valid, the ExecStart binary executable. The binary's path is
// pointed at this test's own executable, since no sluice is installed at
// /usr/local/bin here.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze := need(t, "systemd-analyze", "systemd")
	unit, err := os.ReadFile("sluice.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"DynamicUser=yes", "StateDirectory=sluice", "LimitNOFILE=", "Restart=on-failure",
		"ExecReload=/bin/kill -HUP $MAINPID", "NoNewPrivileges=yes", "ProtectSystem=strict"} {
		if !strings.Contains(string(unit), want) {
			t.Errorf("sluice.service lacks %q", want)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sluice.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/sluice", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), analyze, "verify", path).CombinedOutput()
	// verify prints warnings about other units of the machine it loads; only
	// lines about this unit count.
	var ours []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "sluice.service") {
			ours = append(ours, l)
		}
	}
	if err != nil || len(ours) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// The alert rules pass promtool's check (PromQL parses, templates render)
// and its unit tests (deploy/prometheus/sluice-alerts.test.yml; the outbox
// relay's rules beside them): the
// alerts fire on the series they are meant for, and not before their for:.
func TestAlertRulesPromtool(t *testing.T) {
	promtool := need(t, "promtool", "prometheus")
	for _, args := range [][]string{
		{"check", "rules", "prometheus/sluice-alerts.yml"},
		{"test", "rules", "prometheus/sluice-alerts.test.yml"},
		{"check", "rules", "prometheus/sluice-outbox-alerts.yml"},
		{"test", "rules", "prometheus/sluice-outbox-alerts.test.yml"},
	} {
		out, err := exec.CommandContext(t.Context(), promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
