package told

import "testing"

// TestOnceTellsTheFirstAndTheEnd: of a run of failures only the first is
// told; its end is told once, with how many there were; the next run is
// told again.
func TestOnceTellsTheFirstAndTheEnd(t *testing.T) {
	var o Once
	if ok, _, _ := o.End(); ok {
		t.Fatal("an end told with nothing failing")
	}
	if !o.Fail() || o.Fail() || o.Fail() {
		t.Fatal("want only the first failure told")
	}
	if ok, n, since := o.End(); !ok || n != 3 || since.IsZero() {
		t.Fatalf("end = %v, %d, %v; want told, 3", ok, n, since)
	}
	if ok, _, _ := o.End(); ok {
		t.Fatal("an end told twice")
	}
	if !o.Fail() {
		t.Fatal("the next run of failures not told")
	}
}
