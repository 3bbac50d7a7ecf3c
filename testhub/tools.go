//go:build tools

// Keeps upstream kubectl's packages in this module's requirements, so `scripts/hub.sh
// kubectl` can build k8s.io/kubernetes/cmd/kubectl at the hub's Kubernetes version.
package main

import _ "k8s.io/kubectl/pkg/cmd"
