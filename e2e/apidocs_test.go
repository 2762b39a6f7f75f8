package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/testproc"
)

// docCommands returns the curl commands of docs/api.md's curl section, one
// string per command (a command spans lines while a quote is open or a
// line ends in a backslash), and the shorthand assignments they use.
func docCommands(t *testing.T) (prelude string, cmds []string) {
	t.Helper()
	b, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "## Calling it with curl")
	if start < 0 {
		t.Fatal(`docs/api.md has no "## Calling it with curl" section`)
	}
	section := doc[start+3:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	var pre []string
	cur := ""
	for _, m := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, line := range strings.Split(m[1], "\n") {
			switch {
			case cur != "":
				cur += "\n" + line
			case strings.HasPrefix(line, "curl "):
				cur = line
			case strings.HasPrefix(line, "S=") || strings.HasPrefix(line, "J="):
				pre = append(pre, line)
			}
			if cur != "" && strings.Count(cur, "'")%2 == 0 && !strings.HasSuffix(cur, "\\") {
				cmds, cur = append(cmds, cur), ""
			}
		}
	}
	return strings.Join(pre, "\n"), cmds
}

// TestAPIDocCurlExamples runs every curl example of docs/api.md against a
// broker, in order, so the documented JSON keeps matching the schema and
// the handlers. Placeholders (RECEIPT, REDRIVE_ID) are sent as written:
// those calls may be refused for the placeholder, but nothing may be
// malformed, unimplemented or internal. Long-poll waits are shortened to
// keep the test fast; the requests are otherwise as documented.
func TestAPIDocCurlExamples(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		testproc.Missing(t, "curl is not installed (apt-get install curl)")
	}
	p := start(t, t.TempDir())
	prelude, cmds := docCommands(t)
	if len(cmds) < 15 {
		t.Fatalf("found %d curl commands in docs/api.md, want at least 15", len(cmds))
	}
	prelude = strings.ReplaceAll(prelude, "127.0.0.1:8080", p.addr)
	waits := regexp.MustCompile(`"(wait|maxWait)":"[0-9.]+s"`)
	for _, c := range cmds {
		c = waits.ReplaceAllString(c, `"$1":"0.1s"`)
		out, err := exec.Command("bash", "-c", prelude+"\n"+strings.Replace(c, "curl ", "curl -s ", 1)).Output()
		if err != nil {
			t.Errorf("%s\n: %v", c, err)
			continue
		}
		got := string(out)
		placeholder := strings.Contains(c, "RECEIPT") || strings.Contains(c, "REDRIVE_ID")
		bad := strings.Contains(got, `"code":"unimplemented"`) || strings.Contains(got, `"code":"internal"`) ||
			(!placeholder && strings.Contains(got, `"code":"invalid_argument"`))
		if bad || got == "" {
			t.Errorf("%s\nanswered: %s", c, got)
		}
	}
}
