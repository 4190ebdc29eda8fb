// Command gopprof is Go itself, for the tests that compare cprof with it.
// For the view test it writes profiles the way Go does: it burns CPU in
// two named functions, 2:1, for about a second under runtime/pprof's CPU
// profiler, then writes a heap profile. For the HTTP tests it is a real
// net/http/pprof server on Go's ServeMux, the oracle for routes, redirects
// and parameters. Standard library only, so it builds offline.
//
//	go run main.go OUTDIR   writes OUTDIR/cpu.pb.gz and OUTDIR/heap.pb.gz
//	go run main.go -serve   serves /debug/pprof/ on a free loopback port,
//	                        printed as one line on stdout, until killed
//	go run main.go -tabwrite  copies stdin to stdout through the
//	                        text/tabwriter runtime/pprof's debug=1 uses
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"text/tabwriter"
)

var sink uint64
var keep [][]byte

//go:noinline
func burnAlpha(rounds int) {
	x := sink
	for r := 0; r < rounds; r++ {
		for i := 0; i < 100000; i++ {
			x = x*6364136223846793005 + uint64(i)
		}
	}
	sink = x
}

//go:noinline
func burnBeta(rounds int) {
	x := sink
	for r := 0; r < rounds; r++ {
		for i := 0; i < 100000; i++ {
			x = x*2862933555777941757 + uint64(i)
		}
	}
	sink = x
}

//go:noinline
func allocate() {
	for i := 0; i < 2000; i++ {
		keep = append(keep, make([]byte, 4096))
	}
}

// serve answers on http.DefaultServeMux, where net/http/pprof registered
// its handlers, exactly as a Go program that imports it does.
func serve() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	fmt.Println(l.Addr().(*net.TCPAddr).Port)
	panic(http.Serve(l, nil))
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: gopprof OUTDIR | gopprof -serve | gopprof -tabwrite")
		os.Exit(2)
	}
	if os.Args[1] == "-serve" {
		serve()
	}
	if os.Args[1] == "-tabwrite" {
		// Standard input through the tabwriter runtime/pprof puts its
		// debug=1 text through.
		w := tabwriter.NewWriter(os.Stdout, 1, 8, 1, '\t', 0)
		if _, err := io.Copy(w, os.Stdin); err != nil {
			panic(err)
		}
		if err := w.Flush(); err != nil {
			panic(err)
		}
		return
	}
	dir := os.Args[1]
	runtime.MemProfileRate = 4096
	cpu, err := os.Create(filepath.Join(dir, "cpu.pb.gz"))
	if err != nil {
		panic(err)
	}
	if err := pprof.StartCPUProfile(cpu); err != nil {
		panic(err)
	}
	allocate()
	// Fixed work, not fixed time: on a loaded machine a time window gets
	// whatever CPU the scheduler grants, and the 2:1 split would be luck.
	burnAlpha(6000)
	burnBeta(3000)
	pprof.StopCPUProfile()
	if err := cpu.Close(); err != nil {
		panic(err)
	}
	runtime.GC()
	heap, err := os.Create(filepath.Join(dir, "heap.pb.gz"))
	if err != nil {
		panic(err)
	}
	if err := pprof.WriteHeapProfile(heap); err != nil {
		panic(err)
	}
	if err := heap.Close(); err != nil {
		panic(err)
	}
}
