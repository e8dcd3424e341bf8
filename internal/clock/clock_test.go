package clock

import (
	"testing"
	"time"
)

func TestManual(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	m := NewManual(t0)
	if got := m.Now(); !got.Equal(t0) {
		t.Fatalf("Now = %v, want %v", got, t0)
	}
	if got := m.Add(time.Minute); !got.Equal(t0.Add(time.Minute)) || !m.Now().Equal(got) {
		t.Fatalf("Add = %v, Now = %v, want %v", got, m.Now(), t0.Add(time.Minute))
	}
	m.Set(t0)
	if !m.Now().Equal(t0) {
		t.Fatalf("after Set, Now = %v", m.Now())
	}
}

func TestOr(t *testing.T) {
	if Or(nil) != Real {
		t.Fatal("Or(nil) is not Real")
	}
	m := NewManual(time.Time{})
	if Or(m) != Clock(m) {
		t.Fatal("Or(m) is not m")
	}
	if d := time.Since(Real.Now()); d < 0 || d > time.Minute {
		t.Fatalf("Real is off by %v", d)
	}
}
