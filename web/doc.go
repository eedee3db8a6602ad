// Package web will hold the console's HTTP API, server-sent events and the embedded UI assets.
// It is not built yet: `plaita console` runs its preflight and exits with "not built yet".
package web
