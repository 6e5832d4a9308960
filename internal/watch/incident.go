package watch

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/pgmedic/pgmedic/internal/model"
)

// Incident is a stretch of time in which triggers fired: it opens with
// the first, stays open while any fires, and closes once none has fired
// for After. Its bundle covers Before ahead of the first and After past
// the last.
type Incident struct {
	ID string `json:"id"`
	// The window's To and CutShort are set when the incident closes or
	// is written cut short (at MaxLength: it goes on, and no new incident
	// opens until it is over; or because watch stopped).
	model.IncidentWindow
	LastFire time.Time `json:"last_fire"`
	// SessionsFrom and SessionsTo bound the ticks where a trigger read
	// from the sessions fired (a lock queue, working sessions, pool
	// waits, a stall); zero when only counters fired. Counters lag the
	// sessions: PostgreSQL reports an idle backend's up to 10 s late.
	SessionsFrom time.Time `json:"sessions_from,omitzero"`
	SessionsTo   time.Time `json:"sessions_to,omitzero"`
	// Triggers are the first firing of each kind, in order.
	Triggers []Firing `json:"triggers"`
}

// Kinds lists the trigger kinds that fired, in the order they first did.
func (i *Incident) Kinds() []string {
	var out []string
	for _, f := range i.Triggers {
		out = append(out, f.Kind)
	}
	return out
}

// Incidents is the state machine that turns firings into incidents. It
// reads no clock: every call says what time it is, so tests drive it with
// their own.
type Incidents struct {
	Before, After, MaxLength time.Duration

	open *Incident
	// held: an incident was cut at MaxLength and its triggers still
	// fire; no new incident opens until After passes with none.
	held     bool
	lastFire time.Time
	// prevTick is the tick Observe saw last: a trigger that fired at it
	// and fires again extends its span.
	prevTick time.Time
}

// Open is the incident in progress, nil when none is.
func (m *Incidents) Open() *Incident { return m.open }

// Observe takes one tick's firings. It returns an incident when one opens
// (opened) and one whose bundle is due (done): closed after After of
// quiet, or cut at MaxLength.
func (m *Incidents) Observe(at time.Time, fired []Firing) (opened, done *Incident) {
	prev := m.prevTick
	m.prevTick = at
	if len(fired) > 0 {
		m.lastFire = at
	}
	if m.held {
		if len(fired) == 0 && at.Sub(m.lastFire) >= m.After {
			m.held = false
		}
		return nil, nil
	}
	if m.open == nil {
		if len(fired) == 0 {
			return nil, nil
		}
		m.open = &Incident{ID: incidentID(at, fired), IncidentWindow: model.IncidentWindow{Opened: at, Firings: map[string]int{}}}
		opened = m.open
	}
	inc := m.open
	for _, f := range fired {
		if inc.Firings[f.Kind] == 0 {
			inc.Triggers = append(inc.Triggers, f)
		}
		inc.Firings[f.Kind]++
		inc.Fired = model.Fire(inc.Fired, f.Kind, at, prev)
		inc.LastFire = at
		if sessionTrigger(f.Kind) {
			if inc.SessionsFrom.IsZero() {
				inc.SessionsFrom = at
			}
			inc.SessionsTo = at
		}
	}
	switch {
	case at.Sub(inc.LastFire) >= m.After:
		done = m.finish(inc.LastFire.Add(m.After), "")
	case m.MaxLength > 0 && at.Sub(inc.Opened) >= m.MaxLength:
		done = m.finish(at, fmt.Sprintf("still going after %s: the bundle holds its first %s", m.MaxLength, m.MaxLength))
		m.held = true
	}
	return opened, done
}

// Stop ends the incident in progress when watch stops; nil when none is.
func (m *Incidents) Stop(at time.Time) *Incident {
	if m.open == nil {
		return nil
	}
	return m.finish(at, "watch stopped before the incident ended")
}

func (m *Incidents) finish(to time.Time, cut string) *Incident {
	inc := m.open
	m.open = nil
	inc.From, inc.To, inc.CutShort = inc.Opened.Add(-m.Before), to, cut
	return inc
}

// incidentID names an incident by when it opened and what fired first:
// a directory name that sorts by time.
func incidentID(at time.Time, fired []Firing) string {
	kinds := map[string]bool{}
	for _, f := range fired {
		kinds[f.Kind] = true
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return at.UTC().Format("20060102T150405Z") + "-" + strings.Join(ks, "+")
}
