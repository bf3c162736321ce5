package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCallRejectsBadConfiguration(t *testing.T) {
	ok := map[string]string{"SNOWTOKEN_ISSUER_URL": "http://issuer", "CALL_CLIENT_ID": "c", "CALL_URL": "http://orders/orders", "CALL_TOKEN_FILE": "/t"}
	for name, edit := range map[string]func(map[string]string){
		"no issuer":      func(m map[string]string) { delete(m, "SNOWTOKEN_ISSUER_URL") },
		"no client":      func(m map[string]string) { delete(m, "CALL_CLIENT_ID") },
		"no url":         func(m map[string]string) { delete(m, "CALL_URL") },
		"no credentials": func(m map[string]string) { delete(m, "CALL_TOKEN_FILE") },
		"both":           func(m map[string]string) { m["CALL_KEY_FILE"] = "/k" },
		"bad interval":   func(m map[string]string) { m["CALL_INTERVAL"] = "-1s" },
		"no key file":    func(m map[string]string) { delete(m, "CALL_TOKEN_FILE"); m["CALL_KEY_FILE"] = "/nonexistent" },
	} {
		env := map[string]string{}
		for k, v := range ok {
			env[k] = v
		}
		edit(env)
		if err := run(t.Context(), []string{"call"}, func(k string) string { return env[k] }, io.Discard); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// TestCall: `consumer call` asks the token endpoint with the workload's
// token as its assertion, and calls the target with the token as DPoP and
// a proof.
func TestCall(t *testing.T) {
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("workload-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	issuer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.URL.Path != "/token" || r.PostForm.Get("client_assertion") != "workload-token" || r.Header.Get("DPoP") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, `{"access_token":"bound","token_type":"DPoP","expires_in":3600}`)
	}))
	defer issuer.Close()
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "DPoP bound" || r.Header.Get("DPoP") == "" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer target.Close()
	env := map[string]string{"SNOWTOKEN_ISSUER_URL": issuer.URL, "CALL_CLIENT_ID": "orders-caller", "CALL_URL": target.URL + "/orders",
		"CALL_TOKEN_FILE": tokenFile, "CALL_INTERVAL": "1h"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, []string{"call"}, func(k string) string { return env[k] }, pw)
		pw.Close()
		done <- err
	}()
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		var l struct {
			Msg    string
			Status int
			Err    string
		}
		_ = json.Unmarshal(sc.Bytes(), &l)
		if l.Msg == "called" || l.Msg == "call failed" {
			if l.Status != http.StatusOK {
				t.Errorf("the call: %s", sc.Text())
			}
			if strings.Contains(sc.Text(), "bound") {
				t.Errorf("the log holds the token: %s", sc.Text())
			}
			cancel()
		}
	}
	if err := <-done; err != nil {
		t.Errorf("call: %v", err)
	}
}
