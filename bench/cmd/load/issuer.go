package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// issuerConfig is what every issuer the tool starts shares: one Redis,
// one signing key, one clients file and one SNOWTOKEN_ISSUER, as replicas
// of one deployment do.
type issuerConfig struct {
	issuerURL            string
	redisPort            int
	keyPath, clientsPath string
}

// env is the environment of an issuer in production mode listening on
// port with worker ID worker.
func (c issuerConfig) env(port, worker int) []string {
	return []string{
		"SNOWTOKEN_ENV=production", "SNOWTOKEN_ADDR=127.0.0.1:" + strconv.Itoa(port),
		fmt.Sprintf("SNOWTOKEN_REDIS_URL=redis://127.0.0.1:%d/0", c.redisPort),
		"SNOWTOKEN_ISSUER=" + c.issuerURL, "SNOWTOKEN_SIGNING_KEYS=" + c.keyPath,
		"SNOWTOKEN_CLIENTS_FILE=" + c.clientsPath, "SNOWTOKEN_WORKER_ID=" + strconv.Itoa(worker),
		"SNOWTOKEN_LOG_LEVEL=warn",   // a 503's cause is a warning; a run that goes well logs none
		"SNOWTOKEN_METRICS_ADDR=off", // not measured; and 9090 may be taken
	}
}

// newClient makes a client with scopes read and write by the issuer's own
// `client new`, and returns its secret and its clients-file entry.
func newClient(issuerBin, id string) (secret, entry string, err error) {
	out, err := exec.Command(issuerBin, "client", "new", "-id", id, "-scopes", "read,write").CombinedOutput()
	if err != nil {
		return "", "", fmt.Errorf("client new: %v: %s", err, out)
	}
	return parseClientNew(out)
}

// basicAuth is the Authorization header value of client id with secret
// (its ID and secret are URL-safe, as `client new` makes them).
func basicAuth(id, secret string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(id+":"+secret))
}

// withField is a clients-file entry with its field name set to value, such
// as token_format or revocation_feed: `client new` has no flag for them.
func withField(entry, name string, value any) (string, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(entry), &fields); err != nil {
		return "", fmt.Errorf("client new entry: %w", err)
	}
	f, err := json.Marshal(value)
	if err != nil {
		return "", err
	}
	fields[name] = f
	b, err := json.Marshal(fields)
	return string(b), err
}

func parseClientNew(out []byte) (secret, entry string, err error) {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if s, ok := strings.CutPrefix(sc.Text(), "client_secret:"); ok {
			secret = strings.TrimSpace(s)
		}
	}
	if entry = entryLine(out); secret == "" || entry == "" {
		return "", "", fmt.Errorf("unexpected client new output: %s", out)
	}
	return secret, entry, nil
}

// entryLine is the clients-file entry that `client new` printed in out: its
// last line that starts with "{"; "" if none does.
func entryLine(out []byte) string {
	entry := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "{") {
			entry = line
		}
	}
	return entry
}

var httpClient = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

func issue(issuerURL, basic string) (string, error) {
	req, err := http.NewRequest(http.MethodPost, issuerURL+"/token", strings.NewReader(url.Values{"grant_type": {"client_credentials"}}.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", basic)
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("POST /token: %s: %s", resp.Status, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return "", err
	}
	return body.AccessToken, nil
}

// issueN issues n tokens with 64 concurrent clients and keeps them in into,
// unless into is nil; else len(into) is n.
func issueN(issuerURL, basic string, n int64, into []string) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < n; i = next.Add(1) - 1 {
				t, err := issue(issuerURL, basic)
				if err != nil {
					errc <- err
					return
				}
				if into != nil {
					into[i] = t
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return <-errc
}
