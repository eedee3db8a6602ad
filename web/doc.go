// Package web holds the console's HTTP API, server-sent events and the embedded UI assets.
package web
