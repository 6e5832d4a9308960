package scenario

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pgmedic/pgmedic/internal/lab"
)

// TestLanesShareTheFirstLanesList: once the second cluster has run the
// scenarios that wait, it takes the first lane's from the back of the
// list, never one that needs the standby, and no scenario runs twice.
// The first lane's first scenario holds its lane until the second cluster
// has taken one of its list, so the test does not depend on timing.
func TestLanesShareTheFirstLanesList(t *testing.T) {
	first, other := &lab.Cluster{Standby: &lab.Cluster{}}, &lab.Cluster{}
	list := []Scenario{{Name: "m0"}, {Name: "m1"}, {Name: "m2"}, {Name: "m3", Standby: true}, {Name: "m4"},
		{Name: "w0", Waits: true}, {Name: "o0", OwnCluster: true}}
	var mu sync.Mutex
	ranOn := map[string][]*lab.Cluster{}
	var order []string // the second cluster's
	taken := make(chan struct{})
	var once sync.Once
	released := false
	second := func() (*lab.Cluster, func(), error) {
		return other, func() { mu.Lock(); released = true; mu.Unlock() }, nil
	}
	err := RunLanes(context.Background(), list, first, second, func(i int, c *lab.Cluster) bool {
		name := list[i].Name
		mu.Lock()
		ranOn[name] = append(ranOn[name], c)
		if c == other {
			order = append(order, name)
		}
		mu.Unlock()
		switch {
		case name == "m0":
			select {
			case <-taken:
			case <-time.After(20 * time.Second):
				t.Error("the second cluster took none of the first lane's scenarios while the first lane was busy")
			}
		case c == other && name != "w0":
			once.Do(func() { close(taken) })
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if len(ranOn[s.Name]) != 1 {
			t.Errorf("%s ran %d times", s.Name, len(ranOn[s.Name]))
		}
	}
	if ranOn["m3"][0] != first || ranOn["w0"][0] != other {
		t.Errorf("the standby's scenario and the one that waits ran on the wrong clusters: %v", order)
	}
	if len(order) < 2 || order[0] != "w0" || order[1] != "m4" {
		t.Errorf("the second cluster ran %v: want w0 first, then the first lane's list from its back (m4)", order)
	}
	if !released {
		t.Error("the second cluster was not released")
	}
}

// TestLanesShareTheIsolatedList: the scenarios on clusters of their own
// are one lane's list, from its front; a lane that has run out of its
// own takes them from the back, and none runs twice. The isolated lane's
// first scenario holds its lane until another lane has taken one of its
// list, so the test does not depend on timing.
func TestLanesShareTheIsolatedList(t *testing.T) {
	list := []Scenario{{Name: "m0"}, {Name: "o0", OwnCluster: true}, {Name: "o1", OwnCluster: true}, {Name: "o2", OwnCluster: true}}
	var mu sync.Mutex
	ran := map[string]int{}
	var taken []string // isolated scenarios started while o0 held its lane
	stolen := make(chan struct{})
	var once sync.Once
	err := RunLanes(context.Background(), list, &lab.Cluster{}, nil, func(i int, _ *lab.Cluster) bool {
		name := list[i].Name
		mu.Lock()
		ran[name]++
		mu.Unlock()
		if name == "o0" {
			select {
			case <-stolen:
			case <-time.After(20 * time.Second):
				t.Error("no other lane took an isolated scenario while the isolated lane was busy")
			}
			return true
		}
		if strings.HasPrefix(name, "o") {
			mu.Lock()
			taken = append(taken, name)
			mu.Unlock()
			once.Do(func() { close(stolen) })
		}
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if ran[s.Name] != 1 {
			t.Errorf("%s ran %d times", s.Name, ran[s.Name])
		}
	}
	if len(taken) == 0 || taken[0] != "o2" {
		t.Errorf("the isolated scenarios taken while o0 ran: %v, want o2 (the back of the list) first", taken)
	}
}

// TestLanesStopAtAFailure: a scenario that fails stops its lane, and the
// others start nothing more.
func TestLanesStopAtAFailure(t *testing.T) {
	list := []Scenario{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	var ran []string
	err := RunLanes(context.Background(), list, &lab.Cluster{}, nil, func(i int, _ *lab.Cluster) bool {
		ran = append(ran, list[i].Name)
		return list[i].Name != "b"
	})
	if err != nil || len(ran) != 2 {
		t.Errorf("ran %v (%v): want a and b, then a stop", ran, err)
	}
}

// TestWorkloadWithoutItsPgBouncer: a scenario whose clients connect
// through PgBouncer, run without one, says so instead of panicking (a
// recorder that forgot to start it killed its test process, and the
// process's cluster outlived it).
func TestWorkloadWithoutItsPgBouncer(t *testing.T) {
	e := &Env{}
	err := e.workload(context.Background(), Scenario{Name: "pooled", PgBouncer: &BouncerSpec{PoolSize: 2},
		Go: func(context.Context, *Env) error { t.Fatal("the workload ran without its pool"); return nil }})
	if err == nil || !strings.Contains(err.Error(), "PgBouncer") {
		t.Errorf("got %v, want an error naming PgBouncer", err)
	}
}
