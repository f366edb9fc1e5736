//go:build !wasip1

package abix

// wasm is the real host's extension (none outside a WebAssembly module).
var wasm Host
