package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/auth"
	"github.com/sluice-mq/sluice/sluicetest"
)

// authCLI runs a `sluice user|acl` command in-process on the users file at
// path and returns stdout, stderr and the error.
func authCLI(t *testing.T, path, stdin string, args ...string) (string, string, error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append(args, "--auth-file", path))
	err := root.ExecuteContext(t.Context())
	return out.String(), errOut.String(), err
}

func mustAuthCLI(t *testing.T, path, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := authCLI(t, path, stdin, args...)
	if err != nil {
		t.Fatalf("sluice %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

var tokenLine = regexp.MustCompile(`(?m)^token: (sl_\S+)$`)

func addTokenUser(t *testing.T, path, name string) string {
	t.Helper()
	m := tokenLine.FindStringSubmatch(mustAuthCLI(t, path, "", "user", "add", name, "--token"))
	if m == nil {
		t.Fatalf("user add %s --token printed no token", name)
	}
	return m[1]
}

// eventually retries check for up to 10 s (the server rereads every 2 s).
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v after 10 s", what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The CLI edits the users file of a running server: a user added with a
// token works within a few seconds, a removed one stops working.
func TestUserAddedByTheCLIWorksOnARunningServer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	admin := addTokenUser(t, path, "admin")
	mustAuthCLI(t, path, "", "acl", "add", "--user", "admin", "--allow", "all", "--resource", "*")
	srv := sluicetest.Start(t, sluicetest.WithAuthFile(path), sluicetest.WithFsync("never"))
	u := srv.URL

	mustCLI(t, u, "", "queue", "create", "jobs", "--token", admin)
	if _, _, err := cli(t, u, "", "queue", "create", "jobs2"); err == nil || !strings.Contains(err.Error(), "UNAUTHENTICATED") {
		t.Fatalf("queue create without a token: %v, want UNAUTHENTICATED", err)
	}
	t.Setenv("SLUICE_TOKEN", admin) // the environment works like --token
	mustCLI(t, u, "", "queue", "create", "jobs2")
	t.Setenv("SLUICE_TOKEN", "")

	// The operator's report needs describe on the cluster, like the API.
	if _, _, err := cli(t, u, "", "admin", "corruption"); err == nil || !strings.Contains(err.Error(), "UNAUTHENTICATED") ||
		!strings.Contains(err.Error(), "pass --token") {
		t.Errorf("admin corruption without a token: %v, want UNAUTHENTICATED with what to do", err)
	}
	mustCLI(t, u, "", "admin", "corruption", "--token", admin)

	worker := addTokenUser(t, path, "worker")
	mustAuthCLI(t, path, "", "acl", "add", "--user", "worker", "--allow", "send,consume", "--resource", "queue:jobs")
	eventually(t, "the new user's send", func() error {
		_, _, err := cli(t, u, "hello\n", "queue", "send", "jobs", "--token", worker)
		return err
	})
	// The server's view of its users: the new user and rule, no secret.
	users := mustCLI(t, u, "", "admin", "users", "--token", admin)
	if !strings.Contains(users, "worker") || !strings.Contains(users, "queue:jobs") || strings.Contains(users, worker) || strings.Contains(users, admin) {
		t.Errorf("admin users:\n%s", users)
	}
	if _, _, err := cli(t, u, "", "admin", "users", "--token", worker); err == nil || !strings.Contains(err.Error(), "PERMISSION_DENIED") ||
		!strings.Contains(err.Error(), "sluice acl add") {
		t.Errorf("admin users as worker: %v, want PERMISSION_DENIED with what to do", err)
	}
	if _, _, err := cli(t, u, "x\n", "queue", "send", "jobs2", "--token", worker); err == nil || !strings.Contains(err.Error(), "PERMISSION_DENIED") {
		t.Errorf("worker's send to jobs2: %v, want PERMISSION_DENIED", err)
	}
	out := mustCLI(t, u, "", "queue", "list", "--token", worker)
	if !strings.Contains(out, "jobs") || strings.Contains(out, "jobs2") {
		t.Errorf("worker's queue list shows what it may not describe:\n%s", out)
	}

	_, errOut, err := authCLI(t, path, "", "user", "remove", "worker")
	if err != nil || !strings.Contains(errOut, "1 ACL rules still name worker") {
		t.Fatalf("user remove: %v %q", err, errOut)
	}
	eventually(t, "the removed user's refusal", func() error {
		_, _, err := cli(t, u, "", "queue", "list", "--token", worker)
		if err == nil || !strings.Contains(err.Error(), "UNAUTHENTICATED") {
			return fmt.Errorf("queue list as a removed user: %v", err)
		}
		return nil
	})
	mustAuthCLI(t, path, "", "acl", "remove", "--user", "worker")
	if out := mustAuthCLI(t, path, "", "acl", "list"); strings.Contains(out, "worker") {
		t.Errorf("acl remove --user worker left:\n%s", out)
	}
}

// The file keeps no secret that works in clear, is 0600, and lists what
// each user has; passwords come from stdin and work for Kafka's PLAIN.
func TestUserFileHoldsNoUsableSecretInClear(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	tok := addTokenUser(t, path, "api")
	out := mustAuthCLI(t, path, "s3cret\n", "user", "add", "kafka", "--password-stdin")
	if !strings.Contains(out, "added user kafka") {
		t.Errorf("user add: %q", out)
	}
	out = mustAuthCLI(t, path, "", "user", "add", "sqs", "--access-key")
	m := regexp.MustCompile(`access key id: (AKIA[A-Z2-7]{16})\nsecret access key: (\S{40})`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("user add --access-key printed %q", out)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte(tok)) || bytes.Contains(raw, []byte("s3cret")) {
		t.Errorf("the file holds a token or password in clear:\n%s", raw)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("users file mode %v, want 0600", st.Mode().Perm())
	}
	store, err := auth.Open(path, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := store.Token(tok); !ok || p != "api" {
		t.Errorf("the printed token is not api's: %q %v", p, ok)
	}
	if _, ok := store.Password("kafka", "s3cret"); !ok {
		t.Error("the password from stdin does not verify")
	}
	if user, secret, ok := store.AccessKey(m[1]); !ok || user != "sqs" || secret != m[2] {
		t.Errorf("the printed access key is not sqs's: %q %v", user, ok)
	}

	mustAuthCLI(t, path, "n3w\n", "user", "passwd", "kafka", "--password-stdin")
	if err := store.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, ok := store.Password("kafka", "s3cret"); ok {
		t.Error("the old password still works after passwd")
	}
	if _, ok := store.Password("kafka", "n3w"); !ok {
		t.Error("the new password does not work")
	}

	// Rotation: a new token works beside the old; --replace revokes the old.
	second := tokenLine.FindStringSubmatch(mustAuthCLI(t, path, "", "user", "token", "api"))
	third := tokenLine.FindStringSubmatch(mustAuthCLI(t, path, "", "user", "token", "api", "--replace"))
	if second == nil || third == nil {
		t.Fatal("user token printed no token")
	}
	if err := store.Reload(); err != nil {
		t.Fatal(err)
	}
	for tk, want := range map[string]bool{tok: false, second[1]: false, third[1]: true} {
		if _, ok := store.Token(tk); ok != want {
			t.Errorf("after user token --replace, token %s… works: %v, want %v", tk[:8], ok, want)
		}
	}
	if _, ok := store.Password("kafka", "n3w"); !ok {
		t.Error("user token touched another user's password")
	}
	mustAuthCLI(t, path, "", "user", "access-key", "sqs", "--replace")
	if err := store.Reload(); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := store.AccessKey(m[1]); ok {
		t.Error("user access-key --replace left the old key working")
	}

	out = mustAuthCLI(t, path, "", "user", "list")
	for _, want := range []string{"api", "kafka", "scram", "AKIA"} {
		if !strings.Contains(out, want) {
			t.Errorf("user list lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, m[2]) {
		t.Errorf("user list shows a secret:\n%s", out)
	}
}

// What the commands refuse, each with a message saying why.
func TestUserAndACLRefusals(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	addTokenUser(t, path, "a")
	for _, tc := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"user", "add", "a", "--token"}, `user "a" exists`},
		{"", []string{"user", "add", "b", "--password-stdin"}, "stdin held no password"},
		{"", []string{"user", "remove", "nobody"}, `no user "nobody"`},
		{"", []string{"user", "add", "x*", "--token"}, "without '*'"},
		{"", []string{"acl", "add", "--user", "a", "--allow", "fly", "--resource", "topic:t"}, "unknown operation"},
		{"", []string{"acl", "add", "--user", "a", "--allow", "produce", "--resource", "bucket:t"}, "unknown kind"},
		{"", []string{"acl", "add", "--user", "a", "--allow", "produce"}, "at least one --resource"},
		{"", []string{"acl", "remove", "--user", "a"}, "no rule of a matches"},
	} {
		_, _, err := authCLI(t, path, tc.stdin, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("sluice %s: %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	root := newRootCmd()
	root.SetArgs([]string{"user", "list"})
	t.Setenv("SLUICE_AUTH_FILE", "")
	if err := root.Execute(); err == nil || !strings.Contains(err.Error(), "--auth-file is required") {
		t.Errorf("user list without --auth-file: %v", err)
	}
	mustAuthCLI(t, path, "", "acl", "add", "--user", "a", "--allow", "produce", "--resource", "topic:t")
	if _, _, err := authCLI(t, path, "", "acl", "add", "--user", "a", "--allow", "produce", "--resource", "topic:t"); err == nil {
		t.Error("the same rule was added twice")
	}
	help := mustAuthCLI(t, path, "", "acl", "add", "--help")
	if !strings.Contains(help, "Examples:") || !strings.Contains(help, "--resource topic:orders") {
		t.Errorf("acl add --help has no example:\n%s", help)
	}
}
