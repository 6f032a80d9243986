/*
 * A mock libnvidia-ml.so.1 for NVIDIA's unmodified binaries (gpu-feature-discovery first): it answers the
 * NVML calls they make from a per-node state file, so a process that loads it through LD_LIBRARY_PATH sees the
 * GPUs that file describes.
 *
 * Written by the gpushare.k8s collection from the public NVML ABI (function names, argument order, enum values
 * and struct layouts as NVIDIA documents them); no NVIDIA header or source is included or copied. Only the types
 * and calls this library answers are declared below.
 *
 * The state file is named by GPUSHARE_NVML_STATE and written by plugins/module_utils/nvml_state.py from NVIDIA's
 * hardware tables (plugins/module_utils/gpu_tables.py). One "key value" per line; '#' starts a comment line;
 * the value is the rest of the line. Keys (see nvml_state.py for the whole format):
 *
 *   format 1
 *   driver_version 550.54.15            nvmlSystemGetDriverVersion
 *   nvml_version 12.550.54.15           nvmlSystemGetNVMLVersion
 *   cuda_driver_version 12040           nvmlSystemGetCudaDriverVersion(_v2)
 *   device_count 2                      nvmlDeviceGetCount(_v2); devices are 0 .. device_count-1
 *   device.<i>.name NVIDIA A100-SXM4-80GB
 *   device.<i>.uuid GPU-...             nvmlDeviceGetUUID
 *   device.<i>.memory_mib 81920         nvmlDeviceGetMemoryInfo(_v2)
 *   device.<i>.architecture 7           nvmlDeviceGetArchitecture (nvmlDeviceArchitecture_t)
 *   device.<i>.brand 14                 nvmlDeviceGetBrand (nvmlBrandType_t)
 *   device.<i>.cuda_compute_capability 8 0
 *   device.<i>.pci_bus_id 00000000:07:00.0
 *   device.<i>.pci_device_id 0x20b210de
 *   device.<i>.minor 0                  nvmlDeviceGetMinorNumber
 *   device.<i>.mig_mode none|0|1        nvmlDeviceGetMigMode: none = not MIG-capable (NOT_SUPPORTED)
 *
 * A call for a device index or handle it does not know returns NVML_ERROR_INVALID_ARGUMENT; a query the described
 * GPU cannot answer (MIG mode on a GPU without MIG, fabric info, MIG devices) NVML_ERROR_NOT_SUPPORTED, as NVML does.
 * A call this library does not export stops the caller with the dynamic linker's "undefined symbol" error: that is
 * how the needed set was found (tools/nvml-mock/build.sh, docs/nvidia-gfd.md).
 */

#include <ctype.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define EXPORT __attribute__((visibility("default")))

/* nvmlReturn_t */
typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_UNKNOWN = 999,
};

#define MAX_DEVICES 64
#define NAME_SIZE 96
#define UUID_SIZE 80
#define VERSION_SIZE 80

struct mock_device {
    unsigned int index;
    int present;
    char name[NAME_SIZE];
    char uuid[UUID_SIZE];
    unsigned long long memory_mib;
    unsigned int architecture;
    unsigned int brand;
    int cc_major, cc_minor;
    char bus_id[32];
    unsigned int domain, bus, dev;
    unsigned int pci_device_id, pci_subsystem_id;
    unsigned int minor;
    int mig_mode; /* -1: not MIG-capable; 0 disabled; 1 enabled */
};

/* nvmlDevice_t is an opaque pointer: ours points into this table. */
typedef struct mock_device *nvmlDevice_t;

/* nvmlMemory_t and nvmlMemory_v2_t */
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

/* nvmlPciInfo_t (the v2/v3 layout; v1 shares its first 36 bytes) */
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

static struct {
    int initialised; /* nvmlInit reference count */
    char driver_version[VERSION_SIZE];
    char nvml_version[VERSION_SIZE];
    int cuda_driver_version;
    unsigned int count;
    struct mock_device devices[MAX_DEVICES];
} state;

static void complain(const char *path, int line, const char *what)
{
    if (line > 0)
        fprintf(stderr, "nvml-mock: %s:%d: %s\n", path, line, what);
    else
        fprintf(stderr, "nvml-mock: %s: %s\n", path, what);
}

static int copy_value(char *dest, size_t size, const char *value)
{
    if (strlen(value) >= size)
        return -1;
    strcpy(dest, value);
    return 0;
}

static int parse_uint(const char *value, unsigned int *out)
{
    char *end;
    unsigned long v;
    errno = 0;
    v = strtoul(value, &end, 0);
    if (errno || end == value || *end || v > 0xffffffffUL)
        return -1;
    *out = (unsigned int)v;
    return 0;
}

static int set_device(struct mock_device *d, const char *key, const char *value)
{
    unsigned int u;
    if (!strcmp(key, "name"))
        return copy_value(d->name, sizeof d->name, value);
    if (!strcmp(key, "uuid"))
        return copy_value(d->uuid, sizeof d->uuid, value);
    if (!strcmp(key, "memory_mib")) {
        if (parse_uint(value, &u))
            return -1;
        d->memory_mib = u;
        return 0;
    }
    if (!strcmp(key, "architecture"))
        return parse_uint(value, &d->architecture);
    if (!strcmp(key, "brand"))
        return parse_uint(value, &d->brand);
    if (!strcmp(key, "cuda_compute_capability"))
        return sscanf(value, "%d %d", &d->cc_major, &d->cc_minor) == 2 ? 0 : -1;
    if (!strcmp(key, "pci_bus_id")) {
        if (copy_value(d->bus_id, sizeof d->bus_id, value))
            return -1;
        return sscanf(value, "%x:%x:%x.", &d->domain, &d->bus, &d->dev) == 3 ? 0 : -1;
    }
    if (!strcmp(key, "pci_device_id"))
        return parse_uint(value, &d->pci_device_id);
    if (!strcmp(key, "minor"))
        return parse_uint(value, &d->minor);
    if (!strcmp(key, "mig_mode")) {
        if (!strcmp(value, "none"))
            d->mig_mode = -1;
        else if (!strcmp(value, "0") || !strcmp(value, "1"))
            d->mig_mode = value[0] - '0';
        else
            return -1;
        return 0;
    }
    return -2;
}

static int set_global(const char *key, const char *value)
{
    unsigned int u;
    if (!strcmp(key, "format"))
        return strcmp(value, "1") ? -1 : 0;
    if (!strcmp(key, "driver_version"))
        return copy_value(state.driver_version, sizeof state.driver_version, value);
    if (!strcmp(key, "nvml_version"))
        return copy_value(state.nvml_version, sizeof state.nvml_version, value);
    if (!strcmp(key, "cuda_driver_version")) {
        if (parse_uint(value, &u))
            return -1;
        state.cuda_driver_version = (int)u;
        return 0;
    }
    if (!strcmp(key, "device_count")) {
        if (parse_uint(value, &u) || u > MAX_DEVICES)
            return -1;
        state.count = u;
        return 0;
    }
    return -2;
}

/* Read the state file into `state`; 0 on success, an NVML error (after a message on stderr) otherwise. */
static nvmlReturn_t load_state(void)
{
    const char *path = getenv("GPUSHARE_NVML_STATE");
    char line[512];
    int lineno = 0;
    unsigned int i;
    FILE *f;

    memset(&state.devices, 0, sizeof state.devices);
    state.count = 0;
    state.cuda_driver_version = 0;
    state.driver_version[0] = state.nvml_version[0] = '\0';
    if (!path || !*path) {
        fprintf(stderr, "nvml-mock: GPUSHARE_NVML_STATE is not set: name the node's state file "
                        "(plugins/module_utils/nvml_state.py writes it)\n");
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    f = fopen(path, "r");
    if (!f) {
        complain(path, 0, strerror(errno));
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    for (i = 0; i < MAX_DEVICES; i++)
        state.devices[i].mig_mode = -1;
    while (fgets(line, sizeof line, f)) {
        char *key = line, *value, *end;
        int rc;
        lineno++;
        end = line + strlen(line);
        if (end > line && end[-1] != '\n' && !feof(f)) {
            complain(path, lineno, "line too long");
            fclose(f);
            return NVML_ERROR_UNKNOWN;
        }
        while (end > line && isspace((unsigned char)end[-1]))
            *--end = '\0';
        while (isspace((unsigned char)*key))
            key++;
        if (!*key || *key == '#')
            continue;
        value = key;
        while (*value && !isspace((unsigned char)*value))
            value++;
        if (*value)
            *value++ = '\0';
        while (isspace((unsigned char)*value))
            value++;
        if (!strncmp(key, "device.", 7)) {
            char *dot;
            unsigned long index = strtoul(key + 7, &dot, 10);
            if (dot == key + 7 || *dot != '.' || index >= MAX_DEVICES) {
                complain(path, lineno, "a device key is device.<index>.<field> with index below 64");
                fclose(f);
                return NVML_ERROR_UNKNOWN;
            }
            state.devices[index].present = 1;
            state.devices[index].index = (unsigned int)index;
            rc = set_device(&state.devices[index], dot + 1, value);
        } else {
            rc = set_global(key, value);
        }
        if (rc) {
            char what[640];
            snprintf(what, sizeof what, rc == -2 ? "unknown key %s" : "bad value for %s", key);
            complain(path, lineno, what);
            fclose(f);
            return NVML_ERROR_UNKNOWN;
        }
    }
    fclose(f);
    for (i = 0; i < state.count; i++) {
        if (!state.devices[i].present || !state.devices[i].name[0] || !state.devices[i].uuid[0]) {
            char what[128];
            snprintf(what, sizeof what, "device %u of device_count %u has no name or uuid", i, state.count);
            complain(path, 0, what);
            return NVML_ERROR_UNKNOWN;
        }
    }
    return NVML_SUCCESS;
}

static nvmlReturn_t check_device(nvmlDevice_t device)
{
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (device < state.devices || device >= state.devices + state.count)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(char *out, unsigned int length, const char *value)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(value) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(out, value);
    return NVML_SUCCESS;
}

#define DEVICE_CALL(device, out)                                                                                     \
    do {                                                                                                             \
        nvmlReturn_t rc_ = check_device(device);                                                                     \
        if (rc_ != NVML_SUCCESS)                                                                                     \
            return rc_;                                                                                              \
        if (!(out))                                                                                                  \
            return NVML_ERROR_INVALID_ARGUMENT;                                                                      \
    } while (0)

/* --- initialisation --------------------------------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags;
    if (!state.initialised) {
        nvmlReturn_t rc = load_state();
        if (rc != NVML_SUCCESS)
            return rc;
    }
    state.initialised++;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    state.initialised--;
    return NVML_SUCCESS;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

/* --- system ----------------------------------------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    return copy_string(version, length, state.driver_version);
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    return copy_string(version, length, state.nvml_version);
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *version)
{
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (!version)
        return NVML_ERROR_INVALID_ARGUMENT;
    *version = state.cuda_driver_version;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) { return nvmlSystemGetCudaDriverVersion(version); }

/* --- devices ---------------------------------------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count)
{
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (!count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = state.count;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= state.count)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &state.devices[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    unsigned int i;
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (i = 0; i < state.count; i++) {
        if (!strcmp(state.devices[i].uuid, uuid)) {
            *device = &state.devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device)
{
    unsigned int i;
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (!bus_id || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (i = 0; i < state.count; i++) {
        if (!strcasecmp(state.devices[i].bus_id, bus_id)) {
            *device = &state.devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *bus_id, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByPciBusId_v2(bus_id, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    DEVICE_CALL(device, index);
    *index = device->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
    DEVICE_CALL(device, minor);
    *minor = device->minor;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    DEVICE_CALL(device, name);
    return copy_string(name, length, device->name);
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    DEVICE_CALL(device, uuid);
    return copy_string(uuid, length, device->uuid);
}

EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, unsigned int *brand)
{
    DEVICE_CALL(device, brand);
    *brand = device->brand;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int *arch)
{
    DEVICE_CALL(device, arch);
    *arch = device->architecture;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    DEVICE_CALL(device, major);
    if (!minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = device->cc_major;
    *minor = device->cc_minor;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    DEVICE_CALL(device, memory);
    memory->total = device->memory_mib * 1024ULL * 1024ULL;
    memory->used = 0;
    memory->free = memory->total;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    DEVICE_CALL(device, memory);
    memory->total = device->memory_mib * 1024ULL * 1024ULL;
    memory->reserved = 0;
    memory->used = 0;
    memory->free = memory->total;
    return NVML_SUCCESS;
}

static void fill_pci(nvmlDevice_t device, nvmlPciInfo_t *pci, int with_bus_id)
{
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04x:%02x:%02x.0", device->domain & 0xffff, device->bus,
             device->dev);
    pci->domain = device->domain;
    pci->bus = device->bus;
    pci->device = device->dev;
    pci->pciDeviceId = device->pci_device_id;
    pci->pciSubSystemId = device->pci_subsystem_id;
    if (with_bus_id)
        snprintf(pci->busId, sizeof pci->busId, "%s", device->bus_id);
}

/* v1 has the legacy bus id and the ids, then reserved words: fill the part all versions share. */
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    nvmlPciInfo_t full;
    DEVICE_CALL(device, pci);
    memset(&full, 0, sizeof full);
    fill_pci(device, &full, 0);
    memcpy(pci, &full, offsetof(nvmlPciInfo_t, busId));
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    DEVICE_CALL(device, pci);
    memset(pci, 0, sizeof *pci);
    fill_pci(device, pci, 1);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    return nvmlDeviceGetPciInfo_v2(device, pci);
}

/* --- MIG -------------------------------------------------------------------------------------------------- */

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending)
{
    DEVICE_CALL(device, current);
    if (!pending)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (device->mig_mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = (unsigned int)device->mig_mode;
    return NVML_SUCCESS;
}

/* Handles of ours are always full GPUs (MIG devices are not described yet). */
EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *is_mig)
{
    DEVICE_CALL(device, is_mig);
    *is_mig = 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    DEVICE_CALL(device, count);
    if (device->mig_mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *count = 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig)
{
    DEVICE_CALL(device, mig);
    (void)index;
    if (device->mig_mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    return NVML_ERROR_NOT_FOUND;
}

/* --- not supported on the GPUs described here -------------------------------------------------------------- */

/* NVLink fabric (IMEX): none of ours is attached to one. */
EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, void *info)
{
    DEVICE_CALL(device, info);
    return NVML_ERROR_NOT_SUPPORTED;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, void *info)
{
    DEVICE_CALL(device, info);
    return NVML_ERROR_NOT_SUPPORTED;
}
