package cli

import (
	"runtime/debug"
	"testing"
)

// TestFromBuildInfo: a binary built without -ldflags names the module
// version go install recorded and the revision go build took from the
// checkout; what -ldflags set is kept.
func TestFromBuildInfo(t *testing.T) {
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "4e8954558f4b0f1c2d3e"}, {Key: "vcs.modified", Value: "false"}}
	dirty := []debug.BuildSetting{{Key: "vcs.revision", Value: "4e8954558f4b0f1c2d3e"}, {Key: "vcs.modified", Value: "true"}}
	for _, c := range []struct {
		name            string
		bi              debug.BuildInfo
		version, commit string
		wantV, wantC    string
	}{
		{"go install @tag", debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}}, defaultVersion, "", "v0.3.1", ""},
		{"go build in a checkout", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: rev}, defaultVersion, "", defaultVersion, "4e8954558f4b"},
		{"changed tree", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: dirty}, defaultVersion, "", defaultVersion, "4e8954558f4b, with changes"},
		{"ldflags win", debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}, Settings: rev}, "0.4.0", "abc123", "0.4.0", "abc123"},
	} {
		v, cm := fromBuildInfo(&c.bi, c.version, c.commit)
		if v != c.wantV || cm != c.wantC {
			t.Errorf("%s: %q %q, want %q %q", c.name, v, cm, c.wantV, c.wantC)
		}
	}
}
