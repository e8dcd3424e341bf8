// Command upstream is the load harness's fixed upstream: it answers every
// request with the same 1 KiB JSON tool result, as fast as net/http can.
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"strings"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9801", "address to listen on")
	size := flag.Int("size", 1024, "size of the JSON answer in bytes")
	flag.Parse()
	pad := *size - len(`{"content":""}`)
	if pad < 0 {
		pad = 0
	}
	body, _ := json.Marshal(map[string]string{"content": strings.Repeat("x", pad)})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	log.Printf("upstream on %s answering %d bytes", *addr, len(body))
	log.Fatal(http.ListenAndServe(*addr, h))
}
