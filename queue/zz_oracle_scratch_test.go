package queue

import (
	"bufio"
	"os"
	"testing"
)

func TestZZOracleScratch(t *testing.T) {
	lf, _ := os.Open("/tmp/oracle/lits2.txt")
	of, _ := os.Open("/tmp/oracle/oracle2.txt")
	ls, os2 := bufio.NewScanner(lf), bufio.NewScanner(of)
	bad := 0
	n := 0
	for ls.Scan() && os2.Scan() {
		n++
		lit, want := ls.Text(), os2.Text()
		got, err := CanonicalJSON([]byte(lit))
		g := string(got)
		if err != nil {
			g = "ERR"
		}
		if g != want {
			bad++
			if bad < 30 {
				t.Errorf("%s: got %s (%v) want %s", lit, g, err, want)
			}
		}
	}
	t.Logf("%d lines, %d mismatches", n, bad)
}
