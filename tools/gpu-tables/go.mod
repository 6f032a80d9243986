// The generator of plugins/module_utils/hardware/tables.py: NVIDIA's mock NVML, read through the NVML API.
// Built by build.sh into the user's cache (make tables); not part of the collection's artifact.
module gpushare.local/gpu-tables

go 1.26.0

require (
	github.com/NVIDIA/go-nvlib v0.13.0
	github.com/NVIDIA/go-nvml v0.13.4-1
)

require github.com/google/uuid v1.6.0 // indirect
