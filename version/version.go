// Package version tells which smartt this binary is: the version, the VCS revision it was
// built from and the Go toolchain, read from the build information the Go linker embeds
// (runtime/debug.ReadBuildInfo), with an override for release builds:
//
//	go build -ldflags "-X github.com/smartt-transport/smartt/version.override=1.0.0" ./cmd/smarttd
//
// Without the override the version is the main module's version (a tagged `go install
// smartt/cmd/smarttd@v1.0.0` build), else "devel" plus the VCS revision when the build
// recorded one (`go build` in a git checkout, unless -buildvcs=false), else "devel".
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
)

// override is set at link time with -ldflags "-X github.com/smartt-transport/smartt/version.override=VERSION".
var override string

// Info is what the binary knows about its build.
type Info struct {
	Version   string // release version, module version, or "devel[-REVISION[-dirty]]"
	Revision  string // VCS revision (full hash) the binary was built from, "" if unknown
	Time      string // commit time of Revision (RFC 3339), "" if unknown
	Modified  bool   // the work tree had uncommitted changes at build time
	GoVersion string // Go toolchain, e.g. "go1.26.8"
}

var (
	once sync.Once
	info Info
)

// Get returns the build information (computed once).
func Get() Info {
	once.Do(func() {
		bi, _ := debug.ReadBuildInfo()
		info = fromBuildInfo(bi, override)
	})
	return info
}

// String is the version string, as `smarttd -version` prints it first.
func String() string { return Get().Version }

// Long is one line for humans: version, revision, Go version and platform.
func Long(program string) string {
	i := Get()
	rev := i.Revision
	if rev == "" {
		rev = "unknown"
	} else if len(rev) > 12 {
		rev = rev[:12]
	}
	if i.Modified {
		rev += "-dirty"
	}
	return fmt.Sprintf("%s %s (revision %s, %s, %s/%s)", program, i.Version, rev, i.GoVersion, runtime.GOOS, runtime.GOARCH)
}

// fromBuildInfo derives Info from bi (nil when the binary has none) and the link-time
// override.
func fromBuildInfo(bi *debug.BuildInfo, over string) Info {
	i := Info{GoVersion: runtime.Version(), Version: "devel"}
	if bi == nil {
		if over != "" {
			i.Version = over
		}
		return i
	}
	if bi.GoVersion != "" {
		i.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			i.Revision = s.Value
		case "vcs.time":
			i.Time = s.Value
		case "vcs.modified":
			i.Modified = s.Value == "true"
		}
	}
	switch v := bi.Main.Version; {
	case over != "":
		i.Version = over
	case v != "" && v != "(devel)":
		i.Version = v // a module version: a tag, or a pseudo-version naming the revision
	case i.Revision != "":
		short := i.Revision
		if len(short) > 12 {
			short = short[:12]
		}
		i.Version = "devel-" + short
		if i.Modified {
			i.Version += "-dirty"
		}
	}
	return i
}
