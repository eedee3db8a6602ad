// Package model is the domain vocabulary that storage, the control plane and the front ends
// share: the types each of them reads and writes without importing the others. It holds no
// behaviour beyond what its values say about themselves, and it imports only the standard
// library, so that every layer — engine, store, queue, control, the console and the CLI — can
// use it.
//
// Its first word is the error vocabulary (errors.go): one error type with a class and a code.
// Every package declares its sentinels through it, and a front end maps an error's class (to
// an HTTP status, to an exit status) with no other knowledge of where the error came from.
package model
