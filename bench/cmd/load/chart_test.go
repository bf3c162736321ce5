package main

import (
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestTickStep(t *testing.T) {
	for _, c := range []struct{ peak, want float64 }{
		{0, 1}, {4, 1}, {9, 2}, {23, 5}, {48, 10}, {77, 20}, {120, 50}, {260, 100},
	} {
		if got := tickStep(c.peak); got != c.want {
			t.Errorf("tickStep(%g) = %g, want %g", c.peak, got, c.want)
		}
	}
}

// TestChartBars: the first row is the floor, the peer's rows and the other
// bare handler are told apart from snowtoken's, and each bar carries its
// row's median CPU and floor.
func TestChartBars(t *testing.T) {
	rows := []*row{
		{name: "bare net/http, fixed JSON", floor: floorBare},
		{name: "POST /token (JWT)", floor: floorSign, target: 1.4},
		{name: "bare net/http + one Redis GET (plain go-redis)", floor: floorBare},
		{name: peerPrefix + "GET /validate, hot (same token)", floor: floorBare},
	}
	for i, r := range rows {
		r.res.serverCPU, r.floorN = time.Duration(10+i)*time.Microsecond, 10*time.Microsecond
	}
	bars := chartBars(rows)
	want := []barKind{kindFloor, kindOurs, kindReference, kindPeer}
	for i, b := range bars {
		if b.kind != want[i] {
			t.Errorf("%s: kind %d, want %d", b.label, b.kind, want[i])
		}
		if b.cpu != rows[i].res.serverCPU || b.floor != rows[i].floorN || b.floorName != rows[i].floor || b.target != rows[i].target {
			t.Errorf("%s: bar %+v, not its row's figures", b.label, b)
		}
	}
}

// TestWriteChart: each bar's length is its CPU per request on one scale,
// so a row with twice the floor's CPU draws a bar twice as long.
func TestWriteChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "load.png")
	bars := []bar{
		{label: "bare", kind: kindFloor, cpu: 20 * time.Microsecond, floor: 20 * time.Microsecond, floorName: floorBare},
		{label: "POST /token (JWT)", kind: kindOurs, cpu: 40 * time.Microsecond, floor: 30 * time.Microsecond, floorName: floorSign, target: 1.4},
	}
	if err := writeChart(path, "title", bars); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	length := func(i int) int { // pixels of the bar's colour across its row's middle
		y, n := chartTop+i*chartRowH+chartRowH/2, 0
		c := kindColors[bars[i].kind]
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if uint8(r>>8) == c.R && uint8(g>>8) == c.G && uint8(b>>8) == c.B {
				n++
			}
		}
		return n
	}
	floorLen, oursLen := length(0), length(1)
	if floorLen == 0 || oursLen < 2*floorLen-2 || oursLen > 2*floorLen+2 {
		t.Errorf("bars of %d and %d pixels, want the second twice the first", floorLen, oursLen)
	}
}
