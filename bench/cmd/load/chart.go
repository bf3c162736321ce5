package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// bar is one row of the chart.
type bar struct {
	label string
	value float64 // requests/s
	ratio float64 // to the baseline, as the table gives it
}

// writeChart draws requests/s as horizontal bars, each labelled with its
// ratio to the first (the bare handler), and writes a PNG.
func writeChart(path, title string, bars []bar) error {
	const (
		width, left, right, top, rowH = 900, 330, 150, 40, 34
	)
	height := top + rowH*len(bars) + 20
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	fill(img, img.Bounds(), color.White)
	text(img, 10, 22, title)
	peak := 0.0
	for _, b := range bars {
		peak = max(peak, b.value)
	}
	for i, b := range bars {
		y := top + i*rowH
		text(img, 10, y+18, b.label)
		w := int(float64(width-left-right) * b.value / peak)
		c := color.RGBA{0x3b, 0x82, 0xc4, 0xff}
		if i == 0 {
			c = color.RGBA{0x99, 0x99, 0x99, 0xff}
		}
		fill(img, image.Rect(left, y+4, left+w, y+rowH-8), c)
		text(img, left+w+8, y+18, fmt.Sprintf("%.0f/s  %.2fx", b.value, b.ratio))
	}
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
