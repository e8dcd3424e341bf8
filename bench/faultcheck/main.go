// Command faultcheck counts, after bench/faults.sh's load, what became of
// every call id the load sent: its record in toolgate's ledger (GET
// /calls/{id}) and how many times the upstream ran it (its GET /_counts in
// fault mode). It prints the figures as Markdown table rows and exits 1 when
// a call ran twice or was lost: sent, and missing from the ledger though
// the upstream ran it, or still in flight.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/toolgate/toolgate/apptools"
)

func main() {
	gateway := flag.String("gateway", "http://127.0.0.1:9813", "toolgate's site, where /calls/{id} is")
	upstream := flag.String("upstream", "http://127.0.0.1:9801", "the upstream in fault mode")
	sent := flag.String("sent", "", "the ids sent: PREFIX:N,… for the ids PREFIX1 … PREFIXN")
	query := flag.String("query", "user=u_1&install=in_1", "the caller of GET /calls/{id}")
	workers := flag.Int("workers", 16, "concurrent GET /calls")
	flag.Parse()
	log.SetFlags(0)

	var ids []string
	for _, part := range strings.Split(*sent, ",") {
		prefix, n, ok := strings.Cut(part, ":")
		count, err := strconv.Atoi(n)
		if !ok || err != nil {
			log.Fatalf("faultcheck: -sent %q: want PREFIX:N,…", part)
		}
		for i := 1; i <= count; i++ {
			ids = append(ids, prefix+strconv.Itoa(i))
		}
	}
	caller, err := url.ParseQuery(*query)
	if err != nil {
		log.Fatalf("faultcheck: -query %q: %v", *query, err)
	}
	client := &http.Client{Timeout: 30 * time.Second}
	runs, err := upstreamRuns(client, *upstream)
	if err != nil {
		log.Fatalf("faultcheck: %v", err)
	}

	// The state of each id in the ledger.
	states := make([]string, len(ids))
	var wg sync.WaitGroup
	next := make(chan int)
	for range *workers {
		wg.Go(func() {
			for i := range next {
				states[i] = ledgerState(client, *gateway+"/calls/"+ids[i]+"?"+*query)
			}
		})
	}
	for i := range ids {
		next <- i
	}
	close(next)
	wg.Wait()

	byState := map[string]int{}
	var twice, lost, ranUnrecorded, unrecorded, inFlight, executions int
	sentSet := make(map[string]bool, len(ids))
	for i, id := range ids {
		sentSet[id] = true
		// The upstream counts by Idempotency-Key, which toolgate derives
		// from the caller and the call id.
		n := runs[apptools.IdempotencyKey(caller.Get("user"), caller.Get("install"), id)]
		executions += n
		if n > 1 {
			twice++
		}
		s := states[i]
		byState[s]++
		switch {
		case s == "missing" && n > 0:
			ranUnrecorded++
			lost++
		case s == "missing":
			unrecorded++
		case s == "running" || s == "awaiting_client":
			inFlight++
			lost++
		}
	}
	unknownKeys := 0
	for k, n := range runs {
		if !sentSet[k] && k != "" {
			unknownKeys += n
		}
	}

	row := func(k string, v any) { fmt.Printf("| %s | %v |\n", k, v) }
	row("call ids sent", len(ids))
	row("upstream executions of those ids", executions)
	row("ids the upstream ran more than once (must be 0)", twice)
	row("upstream executions of ids not sent", unknownKeys)
	states2 := make([]string, 0, len(byState))
	for s := range byState {
		states2 = append(states2, s)
	}
	sort.Strings(states2)
	for _, s := range states2 {
		row("ledger: "+s, byState[s])
	}
	row("lost: ran upstream, no ledger record (must be 0)", ranUnrecorded)
	row("lost: still in flight after the deadline (must be 0)", inFlight)
	row("no ledger record, never ran upstream (cut by the load tool's end)", unrecorded)
	if twice > 0 || lost > 0 {
		os.Exit(1)
	}
}

// upstreamRuns reads the upstream's executions per Idempotency-Key.
func upstreamRuns(c *http.Client, base string) (map[string]int, error) {
	resp, err := c.Get(base + "/_counts")
	if err != nil {
		return nil, fmt.Errorf("reading the upstream's counts: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("reading the upstream's counts: %s (is it in fault mode?)", resp.Status)
	}
	runs := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		key, n, ok := strings.Cut(sc.Text(), " ")
		count, err := strconv.Atoi(n)
		if !ok || err != nil {
			return nil, fmt.Errorf("reading the upstream's counts: line %q", sc.Text())
		}
		runs[key] = count
	}
	return runs, sc.Err()
}

// ledgerState is a call's state in the ledger, "done (error)" for a done
// call whose result is an error, "missing" for 404, or "GET failed: …".
func ledgerState(c *http.Client, url string) string {
	resp, err := c.Get(url)
	if err != nil {
		return "GET failed: " + err.Error()
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusNotFound {
		return "missing"
	}
	var a struct {
		Status  string `json:"status"`
		IsError bool   `json:"isError"`
		Content string `json:"content"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &a) != nil {
		return fmt.Sprintf("GET answered %d", resp.StatusCode)
	}
	if a.Status == "done" && a.IsError {
		return "done, error: " + errorKind(a.Content)
	}
	return a.Status
}

// errorKind names an error result by the rule that made it.
func errorKind(content string) string {
	for _, k := range []string{"did not answer within", "handler answered 500", "broke before an answer arrived", "broke while reading", "outcome unknown", "cancelled"} {
		if strings.Contains(content, k) {
			return k
		}
	}
	return "other"
}
