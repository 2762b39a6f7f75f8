package main

import (
	"runtime/debug"
	"strings"
)

// version is stamped by a release build (-ldflags "-X main.version=v1.2.3").
var version = "dev"

// versionString is the version and what built it: the commit, its time and
// whether the tree had uncommitted changes, which `go build` records in
// the binary (debug.ReadBuildInfo) when it runs in a git checkout, and the
// Go version. A binary without -ldflags is "dev" but still says which
// commit it is.
func versionString() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	return describeBuild(version, info)
}

func describeBuild(v string, info *debug.BuildInfo) string {
	if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v = info.Main.Version // go install …@v1.2.3 stamps the module version
	}
	var rev, at, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "modified"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	var parts []string
	for _, p := range []string{rev, at, modified} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "no vcs information")
	}
	return v + " (" + strings.Join(parts, ", ") + ") " + info.GoVersion
}
