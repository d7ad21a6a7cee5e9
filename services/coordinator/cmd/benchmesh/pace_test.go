package main

import (
	"strings"
	"testing"
)

func TestProbePaceMeasuresEachPart(t *testing.T) {
	p, err := probePace()
	if err != nil {
		t.Fatal(err)
	}
	if p.socket <= 0 || p.page <= 0 || p.sha256 <= 0 {
		t.Errorf("probePace() = %+v; want every part measured (> 0)", p)
	}
	if got := p.String(); !strings.Contains(got, "209 KiB over loopback TCP") || !strings.Contains(got, "a fresh page") {
		t.Errorf("String() = %q; want the parts named", got)
	}
}
