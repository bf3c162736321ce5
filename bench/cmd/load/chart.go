package main

import (
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"strings"
	"time"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// The chart (docs/load.png) draws what BENCHMARKS.md argues from the wrk
// table of the same run: each row's server CPU per request beside its
// floor (floor.go: the bare handler's CPU per request in the same round,
// plus one Ed25519 signature or verification where the row does one), the
// go-oauth2 peer's rows among them.

// chartPath is where the chart goes; the tool runs in bench/, so the
// default is the repository's docs/load.png.
var chartPath = flag.String("png", "../docs/load.png", `draw the wrk table's server CPU per request against each row's floor as a PNG chart into this file ("" skips)`)

// The chart's rows: the first starts chartTop pixels down, each is
// chartRowH high.
const chartTop, chartRowH = 78, 30

// barKind is whose row a bar is, which sets its colour.
type barKind int

const (
	kindOurs      barKind = iota // snowtoken
	kindFloor                    // the bare handler: the floor itself
	kindReference                // another bare handler (with one Redis GET)
	kindPeer                     // go-oauth2
)

var kindColors = map[barKind]color.RGBA{
	kindOurs:      {0x3b, 0x82, 0xc4, 0xff},
	kindFloor:     {0x70, 0x70, 0x70, 0xff},
	kindReference: {0xa8, 0xa8, 0xa8, 0xff},
	kindPeer:      {0xe0, 0x8a, 0x2c, 0xff},
}

// bar is one row of the chart: a wrk table row's median round.
type bar struct {
	label      string
	kind       barKind
	cpu, floor time.Duration // server CPU per request, and the row's floor in the same round
	floorName  string        // floorBare, floorSign, ... (floor.go)
	target     float64       // the target: the bound on cpu ÷ floor (0: none)
}

// chartBars are the bars of the wrk table's rows, the bare handler first.
func chartBars(rows []*row) []bar {
	bars := make([]bar, len(rows))
	for i, r := range rows {
		kind := kindOurs
		switch {
		case i == 0:
			kind = kindFloor
		case strings.HasPrefix(r.name, peerPrefix):
			kind = kindPeer
		case strings.HasPrefix(r.name, "bare"):
			kind = kindReference
		}
		bars[i] = bar{label: r.name, kind: kind, cpu: r.res.serverCPU, floor: r.floorN, floorName: r.floor, target: r.target}
	}
	return bars
}

// chartTitle is the chart's title: what it measures, how, and when.
func chartTitle(rounds int) string {
	return fmt.Sprintf("Server CPU per request, each endpoint against its floor (wrk %d connections, median of %d rounds of %v, one run, %s)",
		*connections, rounds, *duration, time.Now().UTC().Format("2006-01-02 15:04 MST"))
}

// writeChart draws each bar's server CPU per request in microseconds as a
// horizontal bar over a light bar of its floor, labelled with both and
// their ratio (and the row's target), and writes a PNG to path. The font is
// ASCII: "us" for µs, "x" for ×.
func writeChart(path, title string, bars []bar) error {
	const (
		width, left, right = 1140, 360, 280
		top, rowH, axisH   = chartTop, chartRowH, 44
	)
	plotW := width - left - right
	height := top + rowH*len(bars) + axisH
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	fill(img, img.Bounds(), color.White)
	text(img, 10, 20, title)
	legend := []struct {
		kind barKind
		name string
	}{{kindOurs, "snowtoken"}, {kindPeer, "go-oauth2 v4 (peer)"}, {kindFloor, "bare net/http handler (the floor)"}, {kindReference, "bare handler + one Redis GET"}}
	x := 10
	for _, l := range legend {
		fill(img, image.Rect(x, 32, x+14, 44), kindColors[l.kind])
		text(img, x+20, 43, l.name)
		x += 20 + 7*len(l.name) + 24
	}
	floorColor := color.RGBA{0xdd, 0xdd, 0xdd, 0xff}
	fill(img, image.Rect(10, 52, 24, 64), floorColor)
	text(img, 30, 63, "light bar, black line: the row's floor, the bare handler's CPU/req in the same round + the signatures and verifications the row does")

	peak := 0.0
	for _, b := range bars {
		peak = max(peak, micros(b.cpu), micros(b.floor))
	}
	step := tickStep(peak)
	peak = math.Ceil(peak/step) * step
	scale := func(us float64) int { return int(float64(plotW) * us / peak) }
	bottom := top + rowH*len(bars)
	grid := color.RGBA{0xee, 0xee, 0xee, 0xff}
	for t := 0.0; t <= peak+step/2; t += step {
		gx := left + scale(t)
		fill(img, image.Rect(gx, top, gx+1, bottom), grid)
		label := fmt.Sprintf("%g", t)
		text(img, gx-7*len(label)/2, bottom+16, label)
	}
	axis := "server CPU per request (us): the server's user + system CPU time over the run / the requests wrk counted"
	text(img, left+plotW/2-7*len(axis)/2, bottom+34, axis)

	black := color.RGBA{0, 0, 0, 0xff}
	for i, b := range bars {
		y := top + i*rowH
		text(img, 10, y+19, b.label)
		fill(img, image.Rect(left, y+3, left+scale(micros(b.floor)), y+rowH-3), floorColor)
		fill(img, image.Rect(left, y+8, left+scale(micros(b.cpu)), y+rowH-8), kindColors[b.kind])
		fx := left + scale(micros(b.floor))
		fill(img, image.Rect(fx, y+1, fx+2, y+rowH-1), black)
		label := fmt.Sprintf("%.1f us = %.2fx %s", micros(b.cpu), float64(b.cpu)/float64(b.floor), b.floorName)
		if b.target > 0 {
			label += fmt.Sprintf(" (<=%g)", b.target)
		}
		text(img, left+max(scale(micros(b.cpu)), scale(micros(b.floor)))+8, y+19, label)
	}
	fill(img, image.Rect(left, top, left+1, bottom), black)

	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tickStep is a round step (1, 2 or 5 times a power of ten) that puts
// about five ticks on an axis from 0 to peak.
func tickStep(peak float64) float64 {
	if peak <= 0 {
		return 1
	}
	raw := peak / 5
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func fill(img *image.RGBA, r image.Rectangle, c color.Color) {
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.Set(x, y, c)
		}
	}
}

func text(img *image.RGBA, x, y int, s string) {
	d := font.Drawer{Dst: img, Src: image.Black, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}
