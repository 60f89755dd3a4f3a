// Package posix runs go-fuse's posixtest suite (POSIX behaviour that FUSE file systems get
// wrong: link counts, renames over open files, directory seeks, locks, truncation, …) against
// any directory: a local one for the baseline, or an `eagernfs mount` of a server.
//
//	POSIX_DIR=/mnt/x go test -v ./...      (scripts/posix-suite.sh runs it on all targets)
package posix

import (
	"os"
	"sort"
	"testing"

	"github.com/hanwen/go-fuse/v2/posixtest"
)

func TestPosix(t *testing.T) {
	root := os.Getenv("POSIX_DIR")
	if root == "" {
		t.Skip("set POSIX_DIR to the directory to test")
	}
	names := make([]string, 0, len(posixtest.All))
	for n := range posixtest.All {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		fn := posixtest.All[name]
		t.Run(name, func(t *testing.T) {
			// Each case in a fresh directory of its own, as go-fuse's own runs do.
			dir, err := os.MkdirTemp(root, name+"-")
			if err != nil {
				t.Fatal(err)
			}
			fn(t, dir)
		})
	}
}
