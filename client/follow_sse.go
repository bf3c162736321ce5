package client

import (
	"bufio"
	"fmt"
	"strings"
)

// The event stream format (WHATWG HTML, Server-sent events), as much of
// it as the revocation feed uses.

// readLine reads one line, without its end (LF, CRLF or CR is not split
// here: CR is dropped from the end), at most maxFeedLine bytes.
func readLine(r *bufio.Reader) (string, error) {
	var b []byte
	for {
		chunk, err := r.ReadSlice('\n')
		b = append(b, chunk...)
		if len(b) > maxFeedLine {
			return "", fmt.Errorf("a line of the stream is over %d bytes", maxFeedLine)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return "", err
		}
		return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
	}
}

// sseEvent is one Server-Sent Event.
type sseEvent struct{ id, name, data string }

// sseParser assembles events from lines (the WHATWG event stream format,
// as much as the feed uses: id, event, data; comments and other fields are
// ignored; data lines are joined with "\n").
type sseParser struct {
	cur     sseEvent
	hasData bool
}

// line takes one line; it returns an event at the blank line that ends it.
func (p *sseParser) line(l string) (sseEvent, bool) {
	if l == "" {
		ev, ok := p.cur, p.cur.name != "" || p.hasData
		p.cur, p.hasData = sseEvent{}, false
		return ev, ok
	}
	if strings.HasPrefix(l, ":") {
		return sseEvent{}, false
	}
	field, value, _ := strings.Cut(l, ":")
	value = strings.TrimPrefix(value, " ")
	switch field {
	case "id":
		p.cur.id = value
	case "event":
		p.cur.name = value
	case "data":
		if p.hasData {
			p.cur.data += "\n"
		}
		p.cur.data += value
		p.hasData = true
	}
	return sseEvent{}, false
}
