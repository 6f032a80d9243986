// Pins NVIDIA's mig-parted: build.sh builds its unmodified nvidia-mig-parted command at this version into the
// user's cache, for the operator lab's nodes (it applies the layout a node's nvidia.com/mig.config label names over
// the node's mock GPUs) and the tests that hold the mock's MIG geometry to it; not part of the collection's artifact.
module gpushare.k8s/tools/mig-parted

go 1.26.0

tool github.com/NVIDIA/mig-parted/cmd/nvidia-mig-parted

require (
	github.com/NVIDIA/go-nvlib v0.7.0 // indirect
	github.com/NVIDIA/go-nvml v0.12.4-0 // indirect
	github.com/NVIDIA/mig-parted v0.10.0 // indirect
	github.com/cpuguy83/go-md2man/v2 v2.0.5 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/sirupsen/logrus v1.9.3 // indirect
	github.com/urfave/cli/v2 v2.27.5 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
	golang.org/x/sys v0.21.0 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
	sigs.k8s.io/yaml v1.4.0 // indirect
)
