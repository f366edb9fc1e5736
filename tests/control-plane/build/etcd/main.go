// The etcd server for tests/control-plane: etcd's own command-line entry point, pinned in go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
