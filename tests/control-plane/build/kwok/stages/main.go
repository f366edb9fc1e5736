// Prints kwok's own default Stages (the ones kwokctl gives its clusters) as one YAML stream, for
// `kwok --config`: node initialisation (Ready, capacity kept), the heartbeat that renews the node
// Lease, and the fast pod stages (bound pods Running and Ready, finished pods, graceful deletions
// finished). The stage texts come from the pinned kwok module itself, so they match its binary.
package main

import (
	"fmt"
	"strings"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodelease "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat-with-lease"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
)

func main() {
	docs := []string{
		nodefast.DefaultNodeInit,
		nodelease.DefaultNodeHeartbeatWithLease,
		podfast.DefaultPodReady,
		podfast.DefaultPodComplete,
		podfast.DefaultPodDelete,
	}
	for i, d := range docs {
		if i > 0 {
			fmt.Println("---")
		}
		fmt.Println(strings.TrimSpace(d))
	}
}
