// Command kd-wasm-unwasi makes a Go wasip1 reactor loadable by kube-descheduler's sandbox, which
// offers no WASI: it replaces the module's wasi_snapshot_preview1 imports by functions defined in
// the module (no output, no files, no environment, a deterministic clock, zero random bytes) and
// makes _initialize the start function.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -ldflags='-s -w' -o plugin.go.wasm .
//	go run kube-descheduler/sdk/go/cmd/kd-wasm-unwasi plugin.go.wasm plugin.wasm
//
// With -imports FILE it lists the imports of FILE and exits.
package main

import (
	"flag"
	"fmt"
	"os"

	"kube-descheduler/sdk/go/internal/unwasi"
)

func main() {
	imports := flag.Bool("imports", false, "list the imports of the one module given and exit")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: kd-wasm-unwasi IN.wasm OUT.wasm | kd-wasm-unwasi -imports IN.wasm")
	}
	flag.Parse()
	if *imports && flag.NArg() == 1 {
		b, err := os.ReadFile(flag.Arg(0))
		if err != nil {
			fail(err)
		}
		list, err := unwasi.Imports(b)
		if err != nil {
			fail(err)
		}
		for _, i := range list {
			fmt.Println(i)
		}
		return
	}
	if flag.NArg() != 2 {
		flag.Usage()
		os.Exit(2)
	}
	in, err := os.ReadFile(flag.Arg(0))
	if err != nil {
		fail(err)
	}
	out, err := unwasi.Rewrite(in)
	if err != nil {
		fail(fmt.Errorf("%s: %w", flag.Arg(0), err))
	}
	if err := os.WriteFile(flag.Arg(1), out, 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "kd-wasm-unwasi:", err)
	os.Exit(1)
}
