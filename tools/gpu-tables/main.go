// Copyright: contributors to the gpushare.k8s collection
// GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

// Command gpu-tables reads go-nvml's mock NVML and writes what it says as JSON: every GPU the mock describes
// (pkg/nvml/mock/gpus) and the DGX systems it simulates (pkg/nvml/mock/dgx*), read through the NVML API
// (nvml.Interface, nvml.Device, nvml.GpuInstance) and named by go-nvlib, the way NVIDIA's device plugin and
// mig-parted name MIG profiles.
//
//	gpu-tables -o mock.json
//
// tools/gpu-tables/merge.py merges this with NVIDIA's documented MIG geometry (mig-geometry.yaml) into
// plugins/module_utils/hardware/tables.py (make tables runs both). The output depends on the pinned modules
// only: the same go.mod writes the same bytes. Objects keep the order written here (products sorted by key).
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"

	nvdev "github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxb200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxh200"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"
)

const (
	nvmlModule  = "github.com/NVIDIA/go-nvml"
	nvlibModule = "github.com/NVIDIA/go-nvlib"
	// The mock marks one of its boards in the name NVML reports ("Mock NVIDIA A100-SXM4-40GB"); a real
	// board reports the name without it.
	mockMarker = "Mock "
)

// Every GPU configuration go-nvml's mock publishes, in the order its package declares them.
var configs = []gpus.Config{
	gpus.A100_PCIE_40GB,
	gpus.A100_PCIE_80GB,
	gpus.A100_SXM4_40GB,
	gpus.A100_SXM4_80GB,
	gpus.A30_PCIE_24GB,
	gpus.H100_SXM5_80GB,
	gpus.H200_SXM5_141GB,
	gpus.B200_SXM5_180GB,
}

// The DGX systems go-nvml's mock simulates, by package name.
var servers = []struct {
	name   string
	server nvml.Interface
}{
	{"dgxa100", dgxa100.New()},
	{"dgxb200", dgxb200.New()},
	{"dgxh100", dgxh100.New()},
	{"dgxh200", dgxh200.New()},
}

// A JSON value whose objects keep their order: item, dict (an object), tuple (an array), block (an array of objects).
type item struct {
	key   string
	value any
}
type dict []item
type tuple []any
type block []dict

// MarshalJSON writes the object's members in their order.
func (d dict) MarshalJSON() ([]byte, error) {
	var out bytes.Buffer
	out.WriteByte('{')
	for i, it := range d {
		if i > 0 {
			out.WriteByte(',')
		}
		key, err := json.Marshal(it.key)
		if err != nil {
			return nil, err
		}
		value, err := json.Marshal(it.value)
		if err != nil {
			return nil, err
		}
		out.Write(key)
		out.WriteByte(':')
		out.Write(value)
	}
	out.WriteByte('}')
	return out.Bytes(), nil
}

func check(ret nvml.Return, what string) {
	if ret != nvml.SUCCESS {
		fail("%s: %s", what, nvml.ErrorString(ret))
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "gpu-tables: "+format+"\n", args...)
	os.Exit(1)
}

// productKey is the product as gpu-feature-discovery labels it (spaces become '-'), without "NVIDIA-".
func productKey(name string) string {
	return strings.TrimPrefix(strings.ReplaceAll(strings.TrimPrefix(name, mockMarker), " ", "-"), "NVIDIA-")
}

func moduleVersion(path string) string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		fail("no build information: build gpu-tables with go build from its go.mod")
	}
	for _, dep := range info.Deps {
		if dep.Path == path {
			return dep.Version
		}
	}
	fail("%s is not among the modules gpu-tables was built with", path)
	return ""
}

func computeProfiles(lib nvdev.Interface, gi nvml.GpuInstance, giProfile int, memoryMB, total uint64) block {
	var result block
	for ci := 0; ci < nvml.COMPUTE_INSTANCE_PROFILE_COUNT; ci++ {
		info, ret := gi.GetComputeInstanceProfileInfo(ci, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		check(ret, fmt.Sprintf("compute instance profile %d of GPU instance profile %d", ci, giProfile))
		profile, err := lib.NewMigProfile(giProfile, ci, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, memoryMB, total)
		if err != nil {
			fail("compute instance profile %d of GPU instance profile %d: %v", ci, giProfile, err)
		}
		placements, ret := gi.GetComputeInstancePossiblePlacements(&info)
		check(ret, fmt.Sprintf("placements of compute instance profile %d", ci))
		starts := tuple{}
		for _, p := range placements {
			starts = append(starts, tuple{p.Start, p.Size})
		}
		result = append(result, dict{
			{"id", ci}, {"name", profile.String()}, {"slices", info.SliceCount}, {"instances", info.InstanceCount},
			{"multiprocessors", info.MultiprocessorCount}, {"shared_copy_engines", info.SharedCopyEngineCount},
			{"shared_decoders", info.SharedDecoderCount}, {"shared_encoders", info.SharedEncoderCount},
			{"shared_jpeg_engines", info.SharedJpegCount}, {"shared_ofa_engines", info.SharedOfaCount},
			{"placements", starts},
		})
	}
	return result
}

func migProfiles(lib nvdev.Interface, device nvml.Device, total uint64) block {
	var result block
	for id := 0; id < nvml.GPU_INSTANCE_PROFILE_COUNT; id++ {
		info, ret := device.GetGpuInstanceProfileInfo(id)
		if ret == nvml.ERROR_NOT_SUPPORTED || ret == nvml.ERROR_INVALID_ARGUMENT {
			continue
		}
		check(ret, fmt.Sprintf("GPU instance profile %d", id))
		// The profile's name is its full compute instance's (C == G), as go-nvlib writes it: 1g.10gb, 1g.10gb+me.
		ciFull := map[uint32]int{1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
			3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
			6: nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE, 7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
			8: nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE}
		ci, ok := ciFull[info.SliceCount]
		if !ok {
			fail("GPU instance profile %d has %d slices, which no compute instance profile spans", id, info.SliceCount)
		}
		profile, err := lib.NewMigProfile(id, ci, nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, info.MemorySizeMB, total)
		if err != nil {
			fail("GPU instance profile %d: %v", id, err)
		}
		placements, ret := device.GetGpuInstancePossiblePlacements(&info)
		check(ret, fmt.Sprintf("placements of GPU instance profile %d", id))
		starts := tuple{}
		for _, p := range placements {
			starts = append(starts, tuple{p.Start, p.Size})
		}
		// Compute instance profiles are read from a GPU instance of this profile (NVML has no other way).
		gi, ret := device.CreateGpuInstance(&info)
		check(ret, fmt.Sprintf("a GPU instance of profile %d", id))
		cis := computeProfiles(lib, gi, id, info.MemorySizeMB, total)
		check(gi.Destroy(), fmt.Sprintf("destroying the GPU instance of profile %d", id))
		result = append(result, dict{
			{"id", id}, {"name", profile.String()}, {"nvlib_name", profile.String()}, {"slices", info.SliceCount}, {"instances", info.InstanceCount},
			{"memory_mib", info.MemorySizeMB}, {"multiprocessors", info.MultiprocessorCount},
			{"copy_engines", info.CopyEngineCount}, {"decoders", info.DecoderCount}, {"encoders", info.EncoderCount},
			{"jpeg_engines", info.JpegCount}, {"ofa_engines", info.OfaCount}, {"p2p", info.IsP2pSupported},
			{"placements", starts}, {"compute_profiles", cis},
		})
	}
	nominalNames(result)
	return result
}

// nominalNames settles the names of a product whose profiles go-nvlib names alike. go-nvlib names a profile
// <g>g.<GB>gb from its memory as a fraction of the GPU's, rounded up to eighths: right for NVML's figures of a
// real board, but the mock gives some boards nominal sizes (H200: 18 GiB of 141 GiB is more than an eighth,
// so its 1g profile would be 1g.35gb, as its 1-slice 35 GiB one). Then every profile of the product is named
// by its nominal size, memory / 1024, the size the mock states; nvlib_name keeps go-nvlib's name. A product
// named alike by go-nvlib and uniquely stays as go-nvlib names it, nvlib_name dropped.
func nominalNames(profiles block) {
	seen := map[string]bool{}
	unique := true
	for _, p := range profiles {
		name := p[1].value.(string)
		unique = unique && !seen[name]
		seen[name] = true
	}
	for i, p := range profiles {
		if unique {
			profiles[i] = append(dict{p[0], p[1]}, p[3:]...)
			continue
		}
		name := p[1].value.(string)
		memory := p[5].value.(uint64)
		if memory%1024 != 0 {
			fail("profile %s: go-nvlib's names collide and %d MiB is no whole GiB to name it by", name, memory)
		}
		slices, rest, _ := strings.Cut(name, "g.")
		_, suffix, _ := strings.Cut(rest, "gb")
		profiles[i][1] = item{"name", fmt.Sprintf("%sg.%dgb%s", slices, memory/1024, suffix)}
		// Its compute instances' names carry the same size: 1c.3g.71gb.
		for _, ci := range p[len(p)-1].value.(block) {
			ciName := ci[1].value.(string)
			head, rest, _ := strings.Cut(ciName, "g.")
			_, tail, _ := strings.Cut(rest, "gb")
			ci[1] = item{"name", fmt.Sprintf("%sg.%dgb%s", head, memory/1024, tail)}
		}
	}
	seen = map[string]bool{}
	for _, p := range profiles {
		name := p[1].value.(string)
		if seen[name] {
			fail("two profiles are both named %s", name)
		}
		seen[name] = true
	}
}

func product(config gpus.Config) (string, dict) {
	srv, err := server.New(server.WithGPUs(config))
	if err != nil {
		fail("a mock server with %s: %v", config.Name, err)
	}
	check(srv.Init(), "nvmlInit")
	defer srv.Shutdown()
	lib := nvdev.New(srv)
	handle, ret := srv.DeviceGetHandleByIndex(0)
	check(ret, "device 0")
	device, err := lib.NewDevice(handle)
	if err != nil {
		fail("device 0: %v", err)
	}
	name, ret := device.GetName()
	check(ret, "name")
	memory, ret := device.GetMemoryInfo()
	check(ret, "memory")
	architecture, err := device.GetArchitectureAsString()
	if err != nil {
		fail("%s: %v", name, err)
	}
	brand, err := device.GetBrandAsString()
	if err != nil {
		fail("%s: %v", name, err)
	}
	capability, err := device.GetCudaComputeCapabilityAsString()
	if err != nil {
		fail("%s: %v", name, err)
	}
	pci, ret := device.GetPciInfo()
	check(ret, "PCI information")
	capable, err := device.IsMigCapable()
	if err != nil {
		fail("%s: %v", name, err)
	}
	fields := dict{
		{"name", strings.TrimPrefix(name, mockMarker)},
		{"brand", brand}, {"architecture", architecture}, {"cuda_compute_capability", capability},
		{"memory_mib", memory.Total / (1 << 20)}, {"pci_device_id", fmt.Sprintf("0x%08x", pci.PciDeviceId)},
	}
	if name != strings.TrimPrefix(name, mockMarker) {
		fields = append(fields, item{"mock_name", name})
	}
	profiles := block{}
	if capable {
		profiles = migProfiles(lib, device, memory.Total)
	}
	fields = append(fields, item{"mig_profiles", profiles})
	return productKey(name), fields
}

func system(name string, srv nvml.Interface) dict {
	check(srv.Init(), name+": nvmlInit")
	defer srv.Shutdown()
	count, ret := srv.DeviceGetCount()
	check(ret, name+": device count")
	key := ""
	for i := 0; i < count; i++ {
		device, ret := srv.DeviceGetHandleByIndex(i)
		check(ret, fmt.Sprintf("%s: device %d", name, i))
		gpu, ret := device.GetName()
		check(ret, fmt.Sprintf("%s: name of device %d", name, i))
		if key != "" && productKey(gpu) != key {
			fail("%s: device %d is a %s, device 0 a %s", name, i, gpu, key)
		}
		key = productKey(gpu)
	}
	driver, ret := srv.SystemGetDriverVersion()
	check(ret, name+": driver version")
	nvmlVersion, ret := srv.SystemGetNVMLVersion()
	check(ret, name+": NVML version")
	cuda, ret := srv.SystemGetCudaDriverVersion()
	check(ret, name+": CUDA driver version")
	return dict{{"gpus", count}, {"product", key}, {"driver_version", driver}, {"nvml_version", nvmlVersion},
		{"cuda_driver_version", cuda}}
}

func main() {
	output := flag.String("o", "", "write the JSON to this file (default: standard output)")
	flag.Parse()

	products := map[string]dict{}
	for _, config := range configs {
		key, fields := product(config)
		if _, seen := products[key]; seen {
			fail("two mock GPUs are both %s", key)
		}
		products[key] = fields
	}
	keys := make([]string, 0, len(products))
	for key := range products {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	sorted := dict{}
	for _, key := range keys {
		sorted = append(sorted, item{key, products[key]})
	}
	systems := dict{}
	for _, s := range servers {
		fields := system(s.name, s.server)
		if _, known := products[fields[1].value.(string)]; !known {
			fail("%s holds %s, which is not among the mock's GPU configurations", s.name, fields[1].value)
		}
		systems = append(systems, item{s.name, fields})
	}
	document := dict{{"go_nvml_version", moduleVersion(nvmlModule)}, {"go_nvlib_version", moduleVersion(nvlibModule)},
		{"products", sorted}, {"servers", systems}}
	compact, err := json.Marshal(document)
	if err != nil {
		fail("%v", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, compact, "", "  "); err != nil {
		fail("%v", err)
	}
	out.WriteByte('\n')

	if *output == "" {
		os.Stdout.Write(out.Bytes())
		return
	}
	tmp, err := os.CreateTemp(filepath.Dir(*output), ".gpu-tables-*.json")
	if err != nil {
		fail("%v", err)
	}
	if _, err := tmp.Write(out.Bytes()); err != nil {
		fail("%v", err)
	}
	if err := tmp.Close(); err != nil {
		fail("%v", err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		fail("%v", err)
	}
	if err := os.Rename(tmp.Name(), *output); err != nil {
		os.Remove(tmp.Name())
		fail("%v", err)
	}
}
