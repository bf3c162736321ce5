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
// ignored; data lines are joined with "\n"). An event whose fields add up
// to more than maxFeedEvent bytes is an error: readLine bounds one line,
// and this bounds the lines of one event, so that a stream of short data
// lines cannot grow an event without end. Data lines are appended to one
// buffer, in time linear in the event's size.
type sseParser struct {
	cur     sseEvent // id and name; data is in data
	data    strings.Builder
	hasData bool
}

// line takes one line; it returns an event at the blank line that ends it.
func (p *sseParser) line(l string) (sseEvent, bool, error) {
	if l == "" {
		ev, ok := p.cur, p.cur.name != "" || p.hasData
		ev.data = p.data.String()
		p.cur, p.hasData = sseEvent{}, false
		p.data.Reset()
		return ev, ok, nil
	}
	if strings.HasPrefix(l, ":") {
		return sseEvent{}, false, nil
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
			p.data.WriteByte('\n')
		}
		p.data.WriteString(value)
		p.hasData = true
	default:
		return sseEvent{}, false, nil
	}
	if n := len(p.cur.id) + len(p.cur.name) + p.data.Len(); n > maxFeedEvent {
		return sseEvent{}, false, fmt.Errorf("an event of the stream is over %d bytes", maxFeedEvent)
	}
	return sseEvent{}, false, nil
}
