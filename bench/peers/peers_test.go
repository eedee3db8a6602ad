package main

import "testing"

func TestSumCallsSkipsInfo(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=10,usec=50,usec_per_call=5.00,rejected_calls=0,failed_calls=1\r\n" +
		"cmdstat_client|setinfo:calls=2,usec=1,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=7,usec=300,usec_per_call=42.86,rejected_calls=0,failed_calls=0\r\n"
	got, err := sumCalls(info)
	if err != nil || got != 12 {
		t.Fatalf("sumCalls = %d, %v; want 12", got, err)
	}
	if _, err := sumCalls("cmdstat_get:calls=x,usec=1\r\n"); err == nil {
		t.Fatal("a malformed count was accepted")
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// The Redis-bound ceiling is the median Redis CPU's inverse, and over asynq's median rate.
func TestRedisBound(t *testing.T) {
	s := summary{Rounds: []round{
		{Asynq: asynqResult{TasksPerSecond: 20000, RedisCPUMicros: 32}, Plaita: plaitaResult{ExecutionsPerSecond: 18000, RedisCPUMicros: 40}},
		{Asynq: asynqResult{TasksPerSecond: 22000, RedisCPUMicros: 30}, Plaita: plaitaResult{ExecutionsPerSecond: 19000, RedisCPUMicros: 25}},
		{Asynq: asynqResult{TasksPerSecond: 21000, RedisCPUMicros: 50}, Plaita: plaitaResult{ExecutionsPerSecond: 17000, RedisCPUMicros: 31.25}},
	}}
	s.finish()
	if s.PlaitaRedisBound != 32000 || s.AsynqRedisBound != 1e6/32 || s.PlaitaRedisBoundRatio != 32000.0/21000 {
		t.Fatalf("bounds %v %v, ratio %v", s.PlaitaRedisBound, s.AsynqRedisBound, s.PlaitaRedisBoundRatio)
	}
	old := summary{Rounds: []round{{Asynq: asynqResult{TasksPerSecond: 1, RedisCPUMicros: 1}, Plaita: plaitaResult{ExecutionsPerSecond: 1}}}}
	old.finish()
	if old.PlaitaRedisBound != 0 || old.PlaitaRedisBoundRatio != 0 {
		t.Fatalf("a binary without the figure got a bound: %+v", old)
	}
}

func TestLastJSONLine(t *testing.T) {
	out := "starting\n{\"scenario\":\"e2e\"}\n\n"
	if got := lastJSONLine(out); got != `{"scenario":"e2e"}` {
		t.Fatalf("lastJSONLine = %q", got)
	}
}

func TestStatusKiB(t *testing.T) {
	status := []byte("Name:\tplaita\nVmHWM:\t   46060 kB\nVmRSS:\t   46000 kB\nRssAnon:\t   19616 kB\nRssFile:\t   26444 kB\n")
	for name, want := range map[string]int64{"VmHWM": 46060, "RssAnon": 19616, "RssFile": 26444, "VmSwap": 0} {
		if got := statusKiB(status, name); got != want {
			t.Errorf("statusKiB(%s) = %d, want %d", name, got, want)
		}
	}
}
