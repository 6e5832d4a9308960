package scenario

import "testing"

// TestGoWorkloadsHaveFolders: each row of the Go workloads table names a
// scenario of the catalogue (a misspelt name would never run) and has its
// function.
func TestGoWorkloadsHaveFolders(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, s := range all {
		names[s.Name] = true
	}
	for name, w := range workloads {
		if !names[name] {
			t.Errorf("Go workload %q: no folder internal/scenario/catalog/%s", name, name)
		}
		if w.Run == nil {
			t.Errorf("Go workload %q has no Run", name)
		}
	}
}
