// Command goref is the Go reference for bench/goroutine_http.sh: a
// net/http/pprof server with a given number of goroutines parked the way a
// C program's threads are (sleeping, receiving on a channel, waiting on a
// mutex, waiting on a condition variable), so that its goroutine profile
// is the same size as the C host's. Standard library only.
//
//	goref N   parks N goroutines, serves /debug/pprof/ on a free loopback
//	          port, printed as one line on stdout, until killed
package main

import (
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof"
	"os"
	"strconv"
	"sync"
	"time"
)

//go:noinline
func parkSleep() {
	for {
		time.Sleep(time.Hour)
	}
}

//go:noinline
func parkChan(c chan int) { <-c }

//go:noinline
func parkMutex(mu *sync.Mutex) { mu.Lock() }

//go:noinline
func parkCond(c *sync.Cond) {
	c.L.Lock()
	for {
		c.Wait()
	}
}

func main() {
	n := 10
	if len(os.Args) > 1 {
		n, _ = strconv.Atoi(os.Args[1])
	}
	c := make(chan int)
	var mu sync.Mutex
	mu.Lock()
	cond := sync.NewCond(&sync.Mutex{})
	for i := 0; i < n; i++ {
		switch i % 4 {
		case 0:
			go parkSleep()
		case 1:
			go parkChan(c)
		case 2:
			go parkMutex(&mu)
		default:
			go parkCond(cond)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	http.Serve(ln, nil)
}
