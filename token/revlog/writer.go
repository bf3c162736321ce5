package revlog

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// WriterOptions configures a Writer. Zero values mean the documented defaults.
type WriterOptions struct {
	// Period is how often the Writer beats. Zero means DefaultPeriod. It
	// must be well under every follower's Threshold (a quarter or less).
	Period time.Duration
	// HeartbeatMaxLen bounds the heartbeat stream (XADD MAXLEN ~). Zero
	// means DefaultHeartbeatMaxLen.
	HeartbeatMaxLen int
	// Logger receives failures to beat, at most one a second. Nil means slog.Default().
	Logger *slog.Logger
	// Heard, if set, reports whether this replica heard a heartbeat within
	// the given time (Follower.Heard): while it heard one within two
	// periods and this Writer does not hold the writer key, Run does not
	// beat, since the holder is alive; so only the holder's beats cost
	// Redis commands. Nil: every Writer runs the script every period.
	Heard func(within time.Duration) bool
}

// Writer appends heartbeats to the heartbeat stream of a log, while it
// holds the writer key; see the package doc.
type Writer struct {
	rdb    redis.UniversalClient
	keys   keys
	owner  string
	period time.Duration
	maxLen string
	log    *slog.Logger
	heard  func(time.Duration) bool
}

// beatLua, with KEYS log, hb, epoch, writer and ARGV new epoch, owner, PX,
// MAXLEN: appends a heartbeat when the writer key is absent or ours, and
// returns 1; else 0.
const beatLua = `
local w = redis.call('GET', KEYS[4])
if w and w ~= ARGV[2] then return 0 end
redis.call('SET', KEYS[4], ARGV[2], 'PX', ARGV[3])
` + infoLua + `
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[4], '*', 'e', e, 'l', last, 'n', n)
return 1
`

var beatScript = redis.NewScript(beatLua)

// NewWriter returns a Writer of the log logKey (redisstore.Store.LogKey) on rdb.
func NewWriter(rdb redis.UniversalClient, logKey string, opts WriterOptions) (*Writer, error) {
	if opts.Period < 0 || opts.HeartbeatMaxLen < 0 {
		return nil, fmt.Errorf("%w: negative period or heartbeat max len", ErrOptions)
	}
	if opts.Period == 0 {
		opts.Period = DefaultPeriod
	}
	if opts.HeartbeatMaxLen == 0 {
		opts.HeartbeatMaxLen = DefaultHeartbeatMaxLen
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Writer{rdb: rdb, keys: keysFor(logKey), owner: newToken(), period: opts.Period,
		maxLen: strconv.Itoa(opts.HeartbeatMaxLen), log: opts.Logger, heard: opts.Heard}, nil
}

// Beat runs the heartbeat script once: one EVALSHA (EVAL when Redis lacks
// the script). It reports whether this Writer holds the writer key and
// wrote a heartbeat.
func (w *Writer) Beat(ctx context.Context) (bool, error) {
	n, err := beatScript.Run(ctx, w.rdb, []string{w.keys.log, w.keys.hb, w.keys.epoch, w.keys.writer},
		newToken(), w.owner, (4 * w.period).Milliseconds(), w.maxLen).Int64()
	if err != nil {
		return false, fmt.Errorf("revlog: heartbeat: %w", err)
	}
	return n == 1, nil
}

// Run beats every period until ctx ends, then returns ctx's error. A beat
// that fails is logged (at most once a second) and the next one tried on
// time: a missed tick is skipped, never made up. A Writer that does not
// hold the writer key skips its beat while WriterOptions.Heard says the
// holder's heartbeats come.
func (w *Writer) Run(ctx context.Context) error {
	t := time.NewTicker(w.period)
	defer t.Stop()
	var logged time.Time
	holding := false
	for {
		if holding || w.heard == nil || !w.heard(2*w.period) {
			var err error
			holding, err = w.Beat(ctx)
			if err != nil && ctx.Err() == nil && time.Since(logged) >= time.Second {
				logged = time.Now()
				w.log.Warn("revocation log heartbeat failed", "err", err.Error())
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
