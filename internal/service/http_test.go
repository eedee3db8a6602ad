package service

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
)

// TestHTTPServesUntilStop: Serve returns at once and the server answers; Stop ends it and
// is safe twice; a Serve after Stop refuses and closes the listener it was given.
func TestHTTPServesUntilStop(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := HTTP{Name: "test http", OnFailure: func(err error) { t.Errorf("failed: %v", err) }}
	if err := h.Serve(context.Background(), ln, &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("hi"))
	})}); err != nil {
		t.Fatal(err)
	}
	res, err := http.Get("http://" + h.Addr())
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if string(body) != "hi" {
		t.Fatalf("answer %q", body)
	}
	h.Stop(context.Background())
	h.Stop(context.Background())
	if _, err := http.Get("http://" + h.Addr()); err == nil {
		t.Fatal("the server still answers after Stop")
	}

	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Serve(context.Background(), ln2, &http.Server{}); !errors.Is(err, ErrStopped) {
		t.Fatalf("Serve after Stop: %v", err)
	}
	if _, err := ln2.Accept(); err == nil {
		t.Fatal("the listener of a refused Serve is still open")
	}
}
