//go:build tools

// Package types pins the gpu-operator module whose public api/nvidia/v1 package build.sh runs controller-gen
// over. Its own go.mod, apart from controller-gen's, so the package loads with the dependency versions NVIDIA's
// module asks for (k8s.io/api among them), not the newer ones controller-tools needs. Never compiled (build tag).
package types

import _ "github.com/NVIDIA/gpu-operator/api/nvidia/v1"
