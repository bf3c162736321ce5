package server

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/snowtoken/snowtoken/client/revocation"
	"github.com/snowtoken/snowtoken/internal/redistest"
	"github.com/snowtoken/snowtoken/token/redisstore"
)

// TestRedoer: what serve gives a follower to write again what the log lost
// revokes each kind again through the store: a token's entry appended
// again, a subject revoked again (a new entry), a client's cutoff written
// again, as the log's entries show.
func TestRedoer(t *testing.T) {
	r := redistest.New(t)
	store, err := redisstore.New(r.Client, redisstore.Options{Prefix: r.Prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.Close)
	redo := redoer(store)
	cut := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	for _, ev := range []revocation.Event{
		{Kind: revocation.KindToken, Key: "7250000000000000001", Exp: time.Now().Add(time.Hour).Unix()},
		{Kind: revocation.KindSubject, Key: "alice"},
		{Kind: revocation.KindClient, Key: "gateway", Cutoff: cut.UnixMilli()},
	} {
		if err := redo(context.Background(), ev); err != nil {
			t.Fatalf("redo %+v: %v", ev, err)
		}
	}
	entries, err := r.Client.XRange(t.Context(), store.LogKey(), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ k, i string }{{"t", "7250000000000000001"}, {"s", "alice"}, {"c", "gateway"}}
	if len(entries) != len(want) {
		t.Fatalf("log %v, want %d entries", entries, len(want))
	}
	for n, w := range want {
		if got := entries[n].Values; got["k"] != w.k || got["i"] != w.i {
			t.Errorf("entry %d = %v, want k %s, i %s", n, got, w.k, w.i)
		}
	}
	if v, want := entries[2].Values["v"], strconv.FormatInt(cut.UnixMilli(), 10); v != want {
		t.Errorf("client entry's cutoff %v, want %s", v, want)
	}
}
