// Command upstream is the load harness's fixed upstream: it answers every
// request with the same 1 KiB JSON tool result, as fast as net/http can.
//
// In fault mode (bench/faults.sh) a fraction of requests fails instead:
// -fail answers 500, -hang holds the request past toolgate's
// upstream_timeout (until the gateway gives up, at most -hang-for), -cut
// reads the request and closes the connection without an answer. Then it
// counts the requests it ran per Idempotency-Key (which toolgate sends to
// app targets), served at GET /_counts as "key count" lines.
//
// With -unix PATH it answers on that unix socket too, as a component on
// the same machine may (toolgate's `component api unix//PATH`).
package main

import (
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9801", "address to listen on")
	size := flag.Int("size", 1024, "size of the JSON answer in bytes")
	fail := flag.Float64("fail", 0, "fraction of requests answered 500")
	hang := flag.Float64("hang", 0, "fraction of requests held until the caller gives up")
	hangFor := flag.Duration("hang-for", 30*time.Second, "the longest a held request is held")
	cut := flag.Float64("cut", 0, "fraction of requests whose connection is closed without an answer")
	unix := flag.String("unix", "", "a unix socket to answer on as well")
	flag.Parse()
	pad := *size - len(`{"content":""}`)
	if pad < 0 {
		pad = 0
	}
	body, _ := json.Marshal(map[string]string{"content": strings.Repeat("x", pad)})
	answer := func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}
	if *fail+*hang+*cut == 0 {
		log.Printf("upstream on %s answering %d bytes", *addr, len(body))
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answer(w) })
		if *unix != "" {
			go serveUnix(*unix, h)
		}
		log.Fatal(http.ListenAndServe(*addr, h))
	}

	f := &faults{runs: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_counts", f.serveCounts)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		f.count(r.Header.Get("Idempotency-Key"))
		switch p := rand.Float64(); {
		case p < *fail:
			http.Error(w, "injected failure", http.StatusInternalServerError)
		case p < *fail+*hang:
			select {
			case <-r.Context().Done():
			case <-time.After(*hangFor):
				answer(w)
			}
		case p < *fail+*hang+*cut:
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
		default:
			answer(w)
		}
	})
	log.Printf("upstream on %s answering %d bytes; faults: %.2f%% 500, %.2f%% hang, %.2f%% cut", *addr, len(body), *fail*100, *hang*100, *cut*100)
	if *unix != "" {
		go serveUnix(*unix, mux)
	}
	log.Fatal(http.ListenAndServe(*addr, mux))
}

// serveUnix serves h on a unix socket at path, replacing a stale one.
func serveUnix(path string, h http.Handler) {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		log.Fatal(err)
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("upstream on unix socket %s", path)
	log.Fatal(http.Serve(l, h))
}

// faults counts the requests run per Idempotency-Key.
type faults struct {
	mu   sync.Mutex
	runs map[string]int
}

func (f *faults) count(key string) {
	f.mu.Lock()
	f.runs[key]++
	f.mu.Unlock()
}

func (f *faults) serveCounts(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "text/plain")
	for k, n := range f.runs {
		fmt.Fprintf(w, "%s %d\n", k, n)
	}
}
