package auth

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Concurrent edits each keep their change: none is lost to another's
// read-modify-write, and the file ends 0600 with no clear secret.
func TestConcurrentEditsAreNotLost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- Edit(path, func(f *File) error {
				f.Users = append(f.Users, User{Name: fmt.Sprintf("u%d", i), Tokens: []string{fmt.Sprintf("clear-%d", i)}})
				return nil
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	f, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Users) != n {
		t.Fatalf("%d users after %d concurrent adds: an edit was lost", len(f.Users), n)
	}
	for _, u := range f.Users {
		if !isHashedToken(u.Tokens[0]) {
			t.Errorf("user %s's token was written in clear", u.Name)
		}
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
}

// A failing edit changes nothing.
func TestFailedEditLeavesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "users.yaml")
	if err := Edit(path, func(f *File) error { f.Users = append(f.Users, User{Name: "a"}); return nil }); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	if err := Edit(path, func(f *File) error { f.Users = nil; return fmt.Errorf("no") }); err == nil {
		t.Fatal("the edit's error was lost")
	}
	if err := Edit(path, func(f *File) error { f.Users = append(f.Users, User{Name: "a"}); return nil }); err == nil {
		t.Fatal("a duplicate user was written")
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("failed edits changed the file:\n%s\n->\n%s", before, after)
	}
}
