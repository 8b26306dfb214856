// etcdbench drives an etcd cluster with clientv3/concurrency Session + Mutex,
// the lock recipe of `etcdctl lock`, and prints one JSON line in the format
// shared with rlbench and redisbench.
//
// Each client has its own session (a lease kept alive by the client) and its
// own Mutex; a pair is Lock then Unlock. Workloads: uncontended (client i
// locks its own name) and contended (every client locks one name).
package main

import (
	"context"
	"flag"
	"fmt"
	"io/ioutil"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/clientv3"
	"go.etcd.io/etcd/clientv3/concurrency"
)

const (
	phaseWarmup = iota
	phaseWindow
	phaseStop
)

// Linux exposes /proc times in USER_HZ, which is 100 on every architecture
// this runs on.
const userHz = 100

type worker struct {
	lat    []float64 // acquire latencies in the window, ms
	pairs  int64
	errors int64
}

func procCPU(pids []int) float64 {
	total := 0.0
	for _, pid := range pids {
		b, err := ioutil.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseFloat(f[11], 64)
		st, _ := strconv.ParseFloat(f[12], 64)
		total += (ut + st) / userHz
	}
	return total
}

func quantile(v []float64, q float64) float64 {
	if len(v) == 0 {
		return 0
	}
	i := int(q*float64(len(v)-1) + 0.5)
	if i >= len(v) {
		i = len(v) - 1
	}
	return v[i]
}

func writeCDF(path string, v []float64) error {
	var b strings.Builder
	const points = 1000
	for k := 0; k <= points && len(v) > 0; k++ {
		q := float64(k) / points
		fmt.Fprintf(&b, "%.4f %.4f\n", q, quantile(v, q))
	}
	return ioutil.WriteFile(path, []byte(b.String()), 0644)
}

func main() {
	endpoints := flag.String("endpoints", "127.0.0.1:2379", "comma-separated etcd client endpoints")
	workload := flag.String("workload", "uncontended", "uncontended | contended")
	clients := flag.Int("clients", 1, "number of clients (sessions), 1..1024")
	conns := flag.Int("conns", 0, "gRPC connections shared by the clients; 0 = min(clients, 4)")
	warmup := flag.Float64("warmup", 2, "warm-up seconds")
	window := flag.Float64("window", 10, "measurement seconds")
	pidList := flag.String("server-pids", "", "comma-separated PIDs of the server processes")
	cdfOut := flag.String("cdf-out", "", "write acquire-latency quantiles (q ms) to this file")
	ttl := flag.Int("ttl", 10, "session TTL in seconds")
	flag.Parse()

	if *clients < 1 || *clients > 1024 || *warmup < 0 || *warmup > 120 || *window <= 0 || *window > 600 {
		fmt.Fprintln(os.Stderr, "etcdbench: clients 1..1024, warmup 0..120 s, window 0..600 s")
		os.Exit(2)
	}
	if *workload != "uncontended" && *workload != "contended" {
		fmt.Fprintf(os.Stderr, "etcdbench: workload %q not supported by etcd locks\n", *workload)
		os.Exit(2)
	}
	var pids []int
	for _, p := range strings.Split(*pidList, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(p)); err == nil {
			pids = append(pids, n)
		}
	}
	nconn := *conns
	if nconn <= 0 {
		nconn = *clients
		if nconn > 4 {
			nconn = 4
		}
	}
	eps := strings.Split(*endpoints, ",")
	cls := make([]*clientv3.Client, nconn)
	for i := range cls {
		c, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second})
		if err != nil {
			fmt.Fprintf(os.Stderr, "etcdbench: connect: %v\n", err)
			os.Exit(1)
		}
		defer c.Close()
		cls[i] = c
	}

	run := fmt.Sprintf("%d", time.Now().UnixNano())
	workers := make([]*worker, *clients)
	mutexes := make([]*concurrency.Mutex, *clients)
	sessions := make([]*concurrency.Session, *clients)
	var setupErr error
	var setupMu sync.Mutex
	var setup sync.WaitGroup
	for i := 0; i < *clients; i++ {
		setup.Add(1)
		go func(i int) {
			defer setup.Done()
			s, err := concurrency.NewSession(cls[i%nconn], concurrency.WithTTL(*ttl))
			if err != nil {
				setupMu.Lock()
				setupErr = err
				setupMu.Unlock()
				return
			}
			name := "/bench/" + run + "/contended"
			if *workload == "uncontended" {
				name = fmt.Sprintf("/bench/%s/u/%d", run, i)
			}
			sessions[i] = s
			mutexes[i] = concurrency.NewMutex(s, name)
			workers[i] = &worker{}
		}(i)
	}
	setup.Wait()
	if setupErr != nil {
		fmt.Fprintf(os.Stderr, "etcdbench: session: %v\n", setupErr)
		os.Exit(1)
	}

	var phase int32 = phaseWarmup
	var wg sync.WaitGroup
	for i := 0; i < *clients; i++ {
		wg.Add(1)
		go func(w *worker, m *concurrency.Mutex) {
			defer wg.Done()
			for {
				ph := atomic.LoadInt32(&phase)
				if ph == phaseStop {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				t0 := time.Now()
				err := m.Lock(ctx)
				acq := time.Since(t0)
				if err == nil {
					err = m.Unlock(ctx)
				}
				cancel()
				// A pair counts in the window if it started there.
				if ph == phaseWindow {
					if err != nil {
						w.errors++
					} else {
						w.pairs++
						w.lat = append(w.lat, float64(acq.Nanoseconds())/1e6)
					}
				}
				if err != nil {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}(workers[i], mutexes[i])
	}

	time.Sleep(time.Duration(*warmup * float64(time.Second)))
	self := []int{os.Getpid()}
	cpu0 := procCPU(pids)
	self0 := procCPU(self)
	t0 := time.Now()
	atomic.StoreInt32(&phase, phaseWindow)
	time.Sleep(time.Duration(*window * float64(time.Second)))
	atomic.StoreInt32(&phase, phaseStop)
	elapsed := time.Since(t0).Seconds()
	cpu1 := procCPU(pids)
	self1 := procCPU(self)
	wg.Wait()
	for _, s := range sessions {
		s.Close()
	}

	var all []float64
	var pairs, errs int64
	for _, w := range workers {
		all = append(all, w.lat...)
		pairs += w.pairs
		errs += w.errors
	}
	sort.Float64s(all)
	cpuPer1k, selfPer1k := 0.0, 0.0
	if pairs > 0 {
		cpuPer1k = (cpu1 - cpu0) / float64(pairs) * 1000
		selfPer1k = (self1 - self0) / float64(pairs) * 1000
	}
	max := 0.0
	if len(all) > 0 {
		max = all[len(all)-1]
	}
	if *cdfOut != "" {
		if err := writeCDF(*cdfOut, all); err != nil {
			fmt.Fprintf(os.Stderr, "etcdbench: %v\n", err)
		}
	}
	fmt.Printf("{\"system\":\"etcd\",\"workload\":\"%s\",\"clients\":%d,\"pairs_per_s\":%.1f,"+
		"\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f,\"errors\":%d,"+
		"\"server_cpu_s_per_1k\":%.4f,\"window_s\":%.1f,\"status\":\"ok\",\"client_cpu_s_per_1k\":%.4f}\n",
		*workload, *clients, float64(pairs)/elapsed, quantile(all, 0.5), quantile(all, 0.99),
		max, errs, cpuPer1k, elapsed, selfPer1k)
}
