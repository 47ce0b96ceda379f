// echo answers every HTTP request with the name of the pod that served it, so a test can tell
// which pod (and so which Node) a request through a Load Balancer reached.
//
//	GET /healthz        200 "ok"
//	GET /<anything>     200 "<POD_NAME or hostname>\n"
//
// It listens on :$PORT (default 8080). It is built static (CGO_ENABLED=0) by
// scripts/provision-node and packed into an image with nothing else in it.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
)

func main() {
	name := os.Getenv("POD_NAME")
	if name == "" {
		name, _ = os.Hostname()
	}
	port := os.Getenv("PORT")
	if port == "" {
		port = "8080"
	}
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, name)
	})
	log.Printf("echo %s listening on :%s", name, port)
	log.Fatal(http.ListenAndServe(":"+port, nil))
}
