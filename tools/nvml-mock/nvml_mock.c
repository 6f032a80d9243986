/*
 * A mock libnvidia-ml.so.1 for NVIDIA's unmodified binaries (GFD, the device plugin, mig-parted): it answers the
 * NVML calls they make from a per-node state file, so a process that loads it through LD_LIBRARY_PATH sees the
 * GPUs that file describes.
 *
 * Written by the gpushare.k8s collection from the public NVML ABI (function names, argument order, enum values
 * and struct layouts as NVIDIA documents them); no NVIDIA header or source is included or copied. Only the types
 * and calls this library answers are declared below.
 *
 * The state file is named by GPUSHARE_NVML_STATE and written by plugins/module_utils/hardware/nvml_state.py from NVIDIA's
 * hardware tables (plugins/module_utils/hardware/tables.py). One "key value" per line; '#' starts a comment line;
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
 *   device.<i>.xid 79                   optional: an XID critical error on the GPU (see "events" below)
 *
 * and, for a GPU with MIG, its GPU-instance profiles, their compute-instance profiles and its MIG devices (one GPU
 * instance with one compute instance each):
 *
 *   device.<i>.gi_profile.<id> <slices> <instances> <memory MiB> <SMs> <copy> <decoders> <encoders> <jpeg> <ofa> <p2p> <name>
 *   device.<i>.gi_placements.<id> <start>:<size> ...   the profile's possible placements (memory slices), in order
 *   device.<i>.ci_profile.<gi profile id>.<ci profile id> <slices> <instances> <SMs> <copy> <decoders> <encoders> <jpeg> <ofa>
 *   device.<i>.mig.<slot> <gi id> <gi profile id> <start> <size> <ci id> <ci profile id> <uuid>
 *   device.<i>.gi.<slot> <gi id> <gi profile id> <start> <size>    a GPU instance without a compute instance
 *
 * The GPU instances a state file names are checked when it is loaded as the hardware would hold them (each at one of
 * its profile's placements, none sharing a memory slice, at most its profile's instance count, compute slices within
 * the GPU's, one +me instance at most: hardware_refuses); a file that breaks one is refused, naming the device and why.
 * Creating a GPU instance is held to the same check (NVML_ERROR_INSUFFICIENT_RESOURCES).
 *
 * The MIG calls NVIDIA's mig-parted makes (MIG mode, GPU and compute instances created and destroyed) change the
 * state and write it back to the file: the mig_mode, mig.<slot> and gi.<slot> lines are rewritten, every other line
 * kept (see "MIG changes" below).
 *
 * Events: every GPU supports nvmlEventTypeXidCriticalError and no other event type. An event set a GPU with an xid
 * line is registered with (for XID events) holds one XID event for it (eventData = the code, gpuInstanceId and
 * computeInstanceId 0xFFFFFFFF: not attributed to a MIG device), which the next nvmlEventSetWait_v2 on that set
 * returns; a wait on a set without a pending event returns NVML_ERROR_TIMEOUT after sleeping the given timeout, cut
 * to EVENT_WAIT_MAX_MS so that a process stopping between waits is not held up. This is how NVIDIA's device plugin
 * is shown a GPU failing (its health check: DP_DISABLE_HEALTHCHECKS unset).
 *
 * A call for a device index or handle it does not know returns NVML_ERROR_INVALID_ARGUMENT; a query the described
 * GPU cannot answer (MIG mode on a GPU without MIG, fabric info, MIG devices) NVML_ERROR_NOT_SUPPORTED, as NVML does.
 * A call this library does not export stops the caller with the dynamic linker's "undefined symbol" error: that is
 * how the needed set was found (tools/nvml-mock/build.sh, docs/nvidia-gfd.md).
 */

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

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
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_UNKNOWN = 999,
};

#define MAX_DEVICES 64
#define MAX_MIGS 8            /* GPU instances (and MIG devices) per GPU: one per memory slice at most */
#define MAX_PLACEMENTS 8      /* possible placements of one GPU-instance profile */
#define GI_PROFILE_COUNT 17   /* NVML_GPU_INSTANCE_PROFILE_COUNT */
#define CI_PROFILE_COUNT 8    /* NVML_COMPUTE_INSTANCE_PROFILE_COUNT */
#define PROFILE_NAME_SIZE 32
#define NAME_SIZE 96
#define UUID_SIZE 80
#define VERSION_SIZE 80

struct mock_device;

struct ci_profile {
    int present;
    unsigned int slices, instances, multiprocessors, copy, decoders, encoders, jpeg, ofa;
};

struct placement {
    unsigned int start, size;
};

struct gi_profile {
    int present;
    unsigned int slices, instances, multiprocessors, copy, decoders, encoders, jpeg, ofa, p2p;
    unsigned long long memory_mib;
    char name[PROFILE_NAME_SIZE];
    struct ci_profile ci[CI_PROFILE_COUNT];
    unsigned int placement_count; /* NVIDIA's possible placements, in the tables' order */
    struct placement placements[MAX_PLACEMENTS];
};

struct gpu_instance;

/* nvmlComputeInstance_t points at one of these, nvmlGpuInstance_t at a struct gpu_instance. */
struct compute_instance {
    struct gpu_instance *gi;
    unsigned int id, profile_id;
};

/* A slot of a GPU's GPU instances: present or free; one compute instance at most (has_ci), which is the slot's MIG
 * device. */
struct gpu_instance {
    struct mock_device *device; /* the parent GPU */
    int present, has_ci;
    unsigned int id, profile_id, start, size;
    struct compute_instance ci;
};

/* A GPU, or a MIG device (is_mig, with its parent, GPU instance and compute instance). */
struct mock_device {
    int is_mig;
    struct mock_device *parent;
    struct gpu_instance *gi;
    unsigned int mig_count;           /* a GPU's MIG devices */
    unsigned int mig_slot[MAX_MIGS];  /* MIG device index -> its GPU instance's slot */
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
    int has_xid;      /* an xid line: an XID event for each event set the GPU is registered with */
    unsigned int xid;
};

/* The opaque handles are pointers into our tables. */
typedef struct mock_device *nvmlDevice_t;
typedef struct gpu_instance *nvmlGpuInstance_t;
typedef struct compute_instance *nvmlComputeInstance_t;

typedef struct {
    unsigned int start, size;
} nvmlPlacement_t; /* nvmlGpuInstancePlacement_t and nvmlComputeInstancePlacement_t */

typedef struct {
    nvmlDevice_t device;
    unsigned int id, profileId;
    nvmlPlacement_t placement;
} nvmlGpuInstanceInfo_t;

typedef struct {
    nvmlDevice_t device;
    nvmlGpuInstance_t gpuInstance;
    unsigned int id, profileId;
    nvmlPlacement_t placement;
} nvmlComputeInstanceInfo_t;

typedef struct {
    unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount, decoderCount,
        encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct {
    unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount,
        sharedEncoderCount, sharedJpegCount, sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

typedef struct {
    unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount, sharedEncoderCount, sharedJpegCount,
        sharedOfaCount, gpuInstanceSliceCount, computeInstanceSliceCount;
    unsigned long long memorySizeMB;
} nvmlDeviceAttributes_t;

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

/* Per GPU: its GPU-instance profiles by id, its GPU-instance slots and the MIG device of each slot. */
static struct gi_profile profiles[MAX_DEVICES][GI_PROFILE_COUNT];
static struct mock_device migs[MAX_DEVICES][MAX_MIGS];
static struct gpu_instance instances[MAX_DEVICES][MAX_MIGS];

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
    if (!strncmp(key, "gi_profile.", 11)) {
        struct gi_profile *p;
        int used = 0;
        if (parse_uint(key + 11, &u) || u >= GI_PROFILE_COUNT)
            return -1;
        p = &profiles[d->index][u];
        if (sscanf(value, "%u %u %llu %u %u %u %u %u %u %u %31s%n", &p->slices, &p->instances, &p->memory_mib,
                   &p->multiprocessors, &p->copy, &p->decoders, &p->encoders, &p->jpeg, &p->ofa, &p->p2p, p->name,
                   &used) != 11 || value[used])
            return -1;
        p->present = 1;
        return 0;
    }
    if (!strncmp(key, "ci_profile.", 11)) {
        unsigned int gi_id, ci_id;
        struct ci_profile *c;
        int used = 0;
        if (sscanf(key + 11, "%u.%u%n", &gi_id, &ci_id, &used) != 2 || key[11 + used] || gi_id >= GI_PROFILE_COUNT ||
            ci_id >= CI_PROFILE_COUNT)
            return -1;
        c = &profiles[d->index][gi_id].ci[ci_id];
        if (sscanf(value, "%u %u %u %u %u %u %u %u%n", &c->slices, &c->instances, &c->multiprocessors, &c->copy,
                   &c->decoders, &c->encoders, &c->jpeg, &c->ofa, &used) != 8 || value[used])
            return -1;
        c->present = 1;
        return 0;
    }
    if (!strncmp(key, "gi_placements.", 14)) {
        struct gi_profile *p;
        const char *at = value;
        if (parse_uint(key + 14, &u) || u >= GI_PROFILE_COUNT)
            return -1;
        p = &profiles[d->index][u];
        p->placement_count = 0;
        while (*at) {
            struct placement pl;
            int used = 0;
            if (p->placement_count == MAX_PLACEMENTS || sscanf(at, "%u:%u%n", &pl.start, &pl.size, &used) != 2)
                return -1;
            p->placements[p->placement_count++] = pl;
            at += used;
            while (isspace((unsigned char)*at))
                at++;
        }
        return 0;
    }
    /* A GPU instance with its compute instance (a MIG device), or one without (gi.<slot>) */
    if (!strncmp(key, "mig.", 4) || !strncmp(key, "gi.", 3)) {
        int with_ci = key[0] == 'm';
        struct gpu_instance *gi;
        int used = 0, n;
        if (parse_uint(key + (with_ci ? 4 : 3), &u) || u >= MAX_MIGS)
            return -1;
        gi = &instances[d->index][u];
        if (gi->present)
            return -1; /* a slot is described once */
        if (with_ci)
            n = sscanf(value, "%u %u %u %u %u %u %79s%n", &gi->id, &gi->profile_id, &gi->start, &gi->size, &gi->ci.id,
                       &gi->ci.profile_id, migs[d->index][u].uuid, &used) == 7;
        else
            n = sscanf(value, "%u %u %u %u%n", &gi->id, &gi->profile_id, &gi->start, &gi->size, &used) == 4;
        if (!n || value[used] || gi->profile_id >= GI_PROFILE_COUNT || gi->ci.profile_id >= CI_PROFILE_COUNT)
            return -1;
        gi->present = 1;
        gi->has_ci = with_ci;
        return 0;
    }
    if (!strcmp(key, "xid")) {
        if (parse_uint(value, &d->xid))
            return -1;
        d->has_xid = 1;
        return 0;
    }
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

/* Tie a GPU's GPU instances to it and number its MIG devices (the slots with a compute instance, in slot order);
 * -1 if they do not hold together (instances without MIG mode on, unknown profiles). */
/* Whether a GPU-instance profile is media-extended (+me): it takes the GPU's one media extension. */
static int media_extended(const struct gi_profile *p)
{
    return strstr(p->name, "+me") != NULL;
}

/* The GPU's compute slices: as many as its largest GPU-instance profile takes. */
static unsigned int compute_slices(unsigned int index)
{
    unsigned int id, most = 0;
    for (id = 0; id < GI_PROFILE_COUNT; id++)
        if (profiles[index][id].present && profiles[index][id].slices > most)
            most = profiles[index][id].slices;
    return most;
}

/* Whether the GPU can hold its present GPU instances plus one more of profile `extra` at `at` (extra: NULL for none),
 * as the hardware decides: each at one of its profile's placements (NVIDIA's, in memory slices: the GPU's memory is
 * counted in those slices, not in MiB, whose per-profile figures in go-nvml's mock exceed the GPU's share on some
 * products), on memory slices no other holds, at most the profile's instance count of it, their compute slices within
 * the GPU's, one media-extended instance at most. NULL when it can, else why not (a static string). */
static const char *hardware_refuses(const struct mock_device *d, const struct gi_profile *extra, const struct placement *at)
{
    unsigned int k, j, count[GI_PROFILE_COUNT] = {0}, slices = 0, media = 0;
    for (k = 0; k <= MAX_MIGS; k++) {
        const struct gpu_instance *gi = k < MAX_MIGS ? &instances[d->index][k] : NULL;
        const struct gi_profile *p;
        struct placement pl;
        if (gi && !gi->present)
            continue;
        if (!gi && !extra)
            break;
        p = gi ? &profiles[d->index][gi->profile_id] : extra;
        pl.start = gi ? gi->start : at->start;
        pl.size = gi ? gi->size : at->size;
        for (j = 0; j < p->placement_count; j++)
            if (p->placements[j].start == pl.start && p->placements[j].size == pl.size)
                break;
        if (j == p->placement_count)
            return "a GPU instance is at a placement its profile does not have";
        for (j = 0; j < k && j < MAX_MIGS; j++) {
            const struct gpu_instance *other = &instances[d->index][j];
            if (other->present && pl.start < other->start + other->size && other->start < pl.start + pl.size)
                return "two GPU instances share memory slices";
        }
        if (++count[p - profiles[d->index]] > p->instances)
            return "more GPU instances of a profile than its instance count";
        slices += p->slices;
        media += media_extended(p);
    }
    if (slices > compute_slices(d->index))
        return "the GPU instances take more compute slices than the GPU has";
    if (media > 1)
        return "more than one media-extended (+me) GPU instance: a GPU has one media extension";
    return NULL;
}

static int link_migs(struct mock_device *d)
{
    unsigned int k;
    d->mig_count = 0;
    for (k = 0; k < MAX_MIGS; k++) {
        struct mock_device *m = &migs[d->index][k];
        struct gpu_instance *gi = &instances[d->index][k];
        struct gi_profile *p = &profiles[d->index][gi->profile_id];
        if (!gi->present)
            continue;
        if (d->mig_mode != 1 || !p->present || (gi->has_ci && !p->ci[gi->ci.profile_id].present))
            return -1;
        gi->device = d;
        gi->ci.gi = gi;
        if (!gi->has_ci)
            continue;
        m->present = 1;
        m->is_mig = 1;
        m->index = d->mig_count;
        m->parent = d;
        m->gi = gi;
        snprintf(m->name, sizeof m->name, "%.62s MIG %.28s", d->name, p->name);
        m->memory_mib = p->memory_mib;
        d->mig_slot[d->mig_count++] = k;
    }
    return 0;
}

/* Read the state file into `state`; 0 on success, an NVML error (after a message on stderr) otherwise. */
static nvmlReturn_t load_state(void)
{
    const char *path = getenv("GPUSHARE_NVML_STATE");
    const char *why;
    char line[512];
    int lineno = 0;
    unsigned int i;
    FILE *f;

    memset(&state.devices, 0, sizeof state.devices);
    memset(profiles, 0, sizeof profiles);
    memset(migs, 0, sizeof migs);
    memset(instances, 0, sizeof instances);
    state.count = 0;
    state.cuda_driver_version = 0;
    state.driver_version[0] = state.nvml_version[0] = '\0';
    if (!path || !*path) {
        fprintf(stderr, "nvml-mock: GPUSHARE_NVML_STATE is not set: name the node's state file "
                        "(plugins/module_utils/hardware/nvml_state.py writes it)\n");
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
        if (link_migs(&state.devices[i]) != 0) {
            char what[160];
            snprintf(what, sizeof what, "device %u: its GPU instances need MIG mode on and known GPU- and "
                                        "compute-instance profiles", i);
            complain(path, 0, what);
            return NVML_ERROR_UNKNOWN;
        }
        why = hardware_refuses(&state.devices[i], NULL, NULL);
        if (why) {
            char what[256];
            snprintf(what, sizeof what, "device %u: its GPU instances are not what the GPU can hold: %s", i, why);
            complain(path, 0, what);
            return NVML_ERROR_UNKNOWN;
        }
    }
    return NVML_SUCCESS;
}

static int is_gpu(nvmlDevice_t device)
{
    uintptr_t p = (uintptr_t)device, first = (uintptr_t)state.devices;
    return p >= first && p < (uintptr_t)(state.devices + state.count) && (p - first) % sizeof *device == 0;
}

static int is_mig(nvmlDevice_t device)
{
    uintptr_t p = (uintptr_t)device, first = (uintptr_t)&migs[0][0];
    size_t n;
    if (p < first || p >= (uintptr_t)(&migs[0][0] + MAX_DEVICES * MAX_MIGS) || (p - first) % sizeof *device)
        return 0;
    n = (p - first) / sizeof *device;
    return n / MAX_MIGS < state.count && instances[n / MAX_MIGS][n % MAX_MIGS].present &&
           instances[n / MAX_MIGS][n % MAX_MIGS].has_ci;
}

static nvmlReturn_t check_device(nvmlDevice_t device)
{
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (!is_gpu(device) && !is_mig(device))
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

/* A GPU handle's own call: MIG device handles are refused as real NVML refuses them for GPU-only queries. */
#define GPU_CALL(device, out)                                                                                        \
    do {                                                                                                             \
        DEVICE_CALL(device, out);                                                                                    \
        if (!is_gpu(device))                                                                                         \
            return NVML_ERROR_INVALID_ARGUMENT;                                                                      \
    } while (0)

static nvmlReturn_t check_gpu_instance(nvmlGpuInstance_t gi)
{
    unsigned int i, k;
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    for (i = 0; i < state.count; i++)
        for (k = 0; k < MAX_MIGS; k++)
            if (gi == &instances[i][k] && gi->present)
                return NVML_SUCCESS;
    return NVML_ERROR_INVALID_ARGUMENT;
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

/* The GPU a handle belongs to: itself, or a MIG device's parent. */
#define GPU_OF(device) ((device)->is_mig ? (device)->parent : (device))

#define DEVICE_CALL(device, out)                                                                                     \
    do {                                                                                                             \
        nvmlReturn_t rc_ = check_device(device);                                                                     \
        if (rc_ != NVML_SUCCESS)                                                                                     \
            return rc_;                                                                                              \
        if (!(out))                                                                                                  \
            return NVML_ERROR_INVALID_ARGUMENT;                                                                      \
    } while (0)

/* --- initialisation --------------------------------------------------------------------------------------- */

/* Held by nvmlInit and nvmlShutdown (NVIDIA's device plugin starts one health check per resource, each calling
 * nvmlInit in a thread of its own) and around the event sets' tables. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    nvmlReturn_t rc = NVML_SUCCESS;
    (void)flags;
    pthread_mutex_lock(&lock);
    if (!state.initialised)
        rc = load_state();
    if (rc == NVML_SUCCESS)
        state.initialised++;
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    nvmlReturn_t rc = NVML_SUCCESS;
    pthread_mutex_lock(&lock);
    if (!state.initialised)
        rc = NVML_ERROR_UNINITIALIZED;
    else
        state.initialised--;
    pthread_mutex_unlock(&lock);
    return rc;
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
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient Resources";
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
        unsigned int j;
        if (!strcmp(state.devices[i].uuid, uuid)) {
            *device = &state.devices[i];
            return NVML_SUCCESS;
        }
        for (j = 0; j < state.devices[i].mig_count; j++) {
            if (!strcmp(migs[i][state.devices[i].mig_slot[j]].uuid, uuid)) {
                *device = &migs[i][state.devices[i].mig_slot[j]];
                return NVML_SUCCESS;
            }
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *device)
{
    unsigned int i, domain, bus, dev, fn;
    int used = 0;
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (!bus_id || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* [domain:]bus:device.function in hex, the domain of 4 or 8 digits (sysfs writes 0000:07:00.0, NVML 00000000:07:00.0) */
    if (sscanf(bus_id, "%x:%x:%x.%x%n", &domain, &bus, &dev, &fn, &used) != 4 || bus_id[used]) {
        domain = 0;
        if (sscanf(bus_id, "%x:%x.%x%n", &bus, &dev, &fn, &used) != 3 || bus_id[used])
            return NVML_ERROR_INVALID_ARGUMENT;
    }
    for (i = 0; i < state.count; i++) {
        const struct mock_device *d = &state.devices[i];
        if (d->domain == domain && d->bus == bus && d->dev == dev && fn == 0) {
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
    GPU_CALL(device, index);
    *index = device->index;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
    GPU_CALL(device, minor);
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
    *brand = GPU_OF(device)->brand;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, unsigned int *arch)
{
    DEVICE_CALL(device, arch);
    *arch = GPU_OF(device)->architecture;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor)
{
    DEVICE_CALL(device, major);
    if (!minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = GPU_OF(device)->cc_major;
    *minor = GPU_OF(device)->cc_minor;
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
    fill_pci(GPU_OF(device), &full, 0);
    memcpy(pci, &full, offsetof(nvmlPciInfo_t, busId));
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    DEVICE_CALL(device, pci);
    memset(pci, 0, sizeof *pci);
    fill_pci(GPU_OF(device), pci, 1);
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
    if (device->is_mig || device->mig_mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *current = *pending = (unsigned int)device->mig_mode;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *is_mig_device)
{
    DEVICE_CALL(device, is_mig_device);
    *is_mig_device = device->is_mig ? 1 : 0;
    return NVML_SUCCESS;
}

/* The most MIG devices the GPU can hold: the most instances of any of its GPU-instance profiles. */
EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    unsigned int i;
    GPU_CALL(device, count);
    if (device->mig_mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    *count = 0;
    for (i = 0; i < GI_PROFILE_COUNT; i++)
        if (profiles[device->index][i].present && profiles[device->index][i].instances > *count)
            *count = profiles[device->index][i].instances;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig)
{
    GPU_CALL(device, mig);
    if (device->mig_mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (index >= device->mig_count)
        return NVML_ERROR_NOT_FOUND;
    *mig = &migs[device->index][device->mig_slot[index]];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig, nvmlDevice_t *device)
{
    DEVICE_CALL(mig, device);
    if (!mig->is_mig)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = mig->parent;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t mig, unsigned int *id)
{
    DEVICE_CALL(mig, id);
    if (!mig->is_mig)
        return NVML_ERROR_NOT_SUPPORTED;
    *id = mig->gi->id;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t mig, unsigned int *id)
{
    DEVICE_CALL(mig, id);
    if (!mig->is_mig)
        return NVML_ERROR_NOT_SUPPORTED;
    *id = mig->gi->ci.id;
    return NVML_SUCCESS;
}

/* A MIG device's attributes: its GPU instance's slices, memory and engines (which the GPU instance's compute instances
 * share), its compute instance's SMs and slices. */
EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t mig, nvmlDeviceAttributes_t *attributes)
{
    const struct gi_profile *p;
    const struct ci_profile *c;
    DEVICE_CALL(mig, attributes);
    if (!mig->is_mig)
        return NVML_ERROR_NOT_SUPPORTED;
    p = &profiles[mig->parent->index][mig->gi->profile_id];
    c = &p->ci[mig->gi->ci.profile_id];
    attributes->multiprocessorCount = c->multiprocessors;
    attributes->sharedCopyEngineCount = p->copy;
    attributes->sharedDecoderCount = p->decoders;
    attributes->sharedEncoderCount = p->encoders;
    attributes->sharedJpegCount = p->jpeg;
    attributes->sharedOfaCount = p->ofa;
    attributes->gpuInstanceSliceCount = p->slices;
    attributes->computeInstanceSliceCount = c->slices;
    attributes->memorySizeMB = p->memory_mib;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t mig, nvmlDeviceAttributes_t *attributes)
{
    return nvmlDeviceGetAttributes_v2(mig, attributes);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                         nvmlGpuInstanceProfileInfo_t *info)
{
    const struct gi_profile *p;
    GPU_CALL(device, info);
    if (device->mig_mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (profile >= GI_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    p = &profiles[device->index][profile];
    if (!p->present)
        return NVML_ERROR_NOT_SUPPORTED;
    info->id = profile;
    info->isP2pSupported = p->p2p;
    info->sliceCount = p->slices;
    info->instanceCount = p->instances;
    info->multiprocessorCount = p->multiprocessors;
    info->copyEngineCount = p->copy;
    info->decoderCount = p->decoders;
    info->encoderCount = p->encoders;
    info->jpegCount = p->jpeg;
    info->ofaCount = p->ofa;
    info->memorySizeMB = p->memory_mib;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceById(nvmlDevice_t device, unsigned int id, nvmlGpuInstance_t *gi)
{
    unsigned int j;
    GPU_CALL(device, gi);
    if (device->mig_mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    for (j = 0; j < MAX_MIGS; j++) {
        if (instances[device->index][j].present && instances[device->index][j].id == id) {
            *gi = &instances[device->index][j];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetInfo(nvmlGpuInstance_t gi, nvmlGpuInstanceInfo_t *info)
{
    nvmlReturn_t rc = check_gpu_instance(gi);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    info->device = gi->device;
    info->id = gi->id;
    info->profileId = gi->profile_id;
    info->placement.start = gi->start;
    info->placement.size = gi->size;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gi, unsigned int profile,
                                                                  unsigned int engine_profile,
                                                                  nvmlComputeInstanceProfileInfo_t *info)
{
    const struct ci_profile *c;
    nvmlReturn_t rc = check_gpu_instance(gi);
    if (rc != NVML_SUCCESS)
        return rc;
    /* One engine profile: NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED. */
    if (!info || profile >= CI_PROFILE_COUNT || engine_profile != 0)
        return NVML_ERROR_INVALID_ARGUMENT;
    c = &profiles[gi->device->index][gi->profile_id].ci[profile];
    if (!c->present)
        return NVML_ERROR_NOT_SUPPORTED;
    info->id = profile;
    info->sliceCount = c->slices;
    info->instanceCount = c->instances;
    info->multiprocessorCount = c->multiprocessors;
    info->sharedCopyEngineCount = c->copy;
    info->sharedDecoderCount = c->decoders;
    info->sharedEncoderCount = c->encoders;
    info->sharedJpegCount = c->jpeg;
    info->sharedOfaCount = c->ofa;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceById(nvmlGpuInstance_t gi, unsigned int id,
                                                           nvmlComputeInstance_t *ci)
{
    nvmlReturn_t rc = check_gpu_instance(gi);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!ci)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (!gi->has_ci || gi->ci.id != id)
        return NVML_ERROR_NOT_FOUND;
    *ci = &gi->ci;
    return NVML_SUCCESS;
}

/* Compute instances span their whole GPU instance here: placement 0, the GPU instance's slices. */
EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo_v2(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t *info)
{
    nvmlReturn_t rc;
    if (!ci)
        return NVML_ERROR_INVALID_ARGUMENT;
    rc = check_gpu_instance(ci->gi);
    if (rc != NVML_SUCCESS || ci != &ci->gi->ci || !ci->gi->has_ci)
        return rc != NVML_SUCCESS ? rc : NVML_ERROR_INVALID_ARGUMENT;
    if (!info)
        return NVML_ERROR_INVALID_ARGUMENT;
    info->device = ci->gi->device;
    info->gpuInstance = ci->gi;
    info->id = ci->id;
    info->profileId = ci->profile_id;
    info->placement.start = 0;
    info->placement.size = profiles[ci->gi->device->index][ci->gi->profile_id].ci[ci->profile_id].slices;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlComputeInstanceGetInfo(nvmlComputeInstance_t ci, nvmlComputeInstanceInfo_t *info)
{
    return nvmlComputeInstanceGetInfo_v2(ci, info);
}

/* --- MIG changes (mig-parted's calls) ---------------------------------------------------------------------
 *
 * A change is written back to the state file before the call returns (the file rewritten beside itself and renamed
 * over it, so a reader sees the old state or the new one): the next process that loads the file, a restarted device
 * plugin or GFD, sees the GPU as mig-parted left it. A MIG mode change takes effect at once (current == pending): no
 * GPU reset is needed or possible here. A GPU instance holds one compute instance at most. */

/* The keys the mock owns in the state file: device.<i>.mig_mode, device.<i>.mig.<k>, device.<i>.gi.<k>. */
static int owned_key(const char *line)
{
    const char *dot;
    while (isspace((unsigned char)*line))
        line++;
    if (strncmp(line, "device.", 7))
        return 0;
    dot = line + 7;
    while (isdigit((unsigned char)*dot))
        dot++;
    if (dot == line + 7 || *dot != '.')
        return 0;
    dot++;
    return !strncmp(dot, "mig_mode", 8) || !strncmp(dot, "mig.", 4) || !strncmp(dot, "gi.", 3);
}

static nvmlReturn_t persist(void)
{
    const char *path = getenv("GPUSHARE_NVML_STATE");
    char tmp[4096], line[512];
    FILE *in, *out;
    unsigned int i, k;
    if (!path || snprintf(tmp, sizeof tmp, "%s.%ld.tmp", path, (long)getpid()) >= (int)sizeof tmp)
        return NVML_ERROR_UNKNOWN;
    in = fopen(path, "r");
    out = in ? fopen(tmp, "w") : NULL;
    if (!out) {
        complain(path, 0, strerror(errno));
        if (in)
            fclose(in);
        return NVML_ERROR_UNKNOWN;
    }
    while (fgets(line, sizeof line, in))
        if (!owned_key(line))
            fputs(line, out);
    fclose(in);
    for (i = 0; i < state.count; i++) {
        const struct mock_device *d = &state.devices[i];
        if (d->mig_mode < 0)
            fprintf(out, "device.%u.mig_mode none\n", i);
        else
            fprintf(out, "device.%u.mig_mode %d\n", i, d->mig_mode);
        for (k = 0; k < MAX_MIGS; k++) {
            const struct gpu_instance *gi = &instances[i][k];
            if (!gi->present)
                continue;
            if (gi->has_ci)
                fprintf(out, "device.%u.mig.%u %u %u %u %u %u %u %s\n", i, k, gi->id, gi->profile_id, gi->start,
                        gi->size, gi->ci.id, gi->ci.profile_id, migs[i][k].uuid);
            else
                fprintf(out, "device.%u.gi.%u %u %u %u %u\n", i, k, gi->id, gi->profile_id, gi->start, gi->size);
        }
    }
    if (fclose(out) != 0 || rename(tmp, path) != 0) {
        complain(tmp, 0, strerror(errno));
        unlink(tmp);
        return NVML_ERROR_UNKNOWN;
    }
    return NVML_SUCCESS;
}

/* A change made: renumber the GPU's MIG devices and write the state back. */
static nvmlReturn_t changed(struct mock_device *d)
{
    link_migs(d);
    return persist();
}

EXPORT nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activation_status)
{
    unsigned int k;
    GPU_CALL(device, activation_status);
    if (device->mig_mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (mode > 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (k = 0; mode == 0 && k < MAX_MIGS; k++)
        if (instances[device->index][k].present)
            return NVML_ERROR_IN_USE; /* GPU instances must be destroyed first */
    device->mig_mode = (int)mode;
    *activation_status = NVML_SUCCESS;
    return changed(device);
}

/* Whether [start, start+size) is free of the GPU's GPU instances. */
static int placement_free(const struct mock_device *d, struct placement pl)
{
    unsigned int k;
    for (k = 0; k < MAX_MIGS; k++) {
        const struct gpu_instance *gi = &instances[d->index][k];
        if (gi->present && pl.start < gi->start + gi->size && gi->start < pl.start + pl.size)
            return 0;
    }
    return 1;
}

static unsigned int instances_of(const struct mock_device *d, unsigned int profile)
{
    unsigned int k, n = 0;
    for (k = 0; k < MAX_MIGS; k++)
        n += instances[d->index][k].present && instances[d->index][k].profile_id == profile;
    return n;
}

/* The profile, checked: MIG on, a profile of this GPU. */
static nvmlReturn_t gi_profile_of(nvmlDevice_t device, unsigned int profile, const struct gi_profile **out)
{
    if (device->mig_mode < 0)
        return NVML_ERROR_NOT_SUPPORTED;
    if (profile >= GI_PROFILE_COUNT || !profiles[device->index][profile].present)
        return NVML_ERROR_INVALID_ARGUMENT;
    *out = &profiles[device->index][profile];
    return NVML_SUCCESS;
}

/* A new GPU instance at a placement (-1: the first free of the profile's possible placements, as the tables list
 * them); NVML_ERROR_INSUFFICIENT_RESOURCES when the profile's instance count is reached or no placement is free. */
static nvmlReturn_t create_gpu_instance(nvmlDevice_t device, unsigned int profile, const struct placement *at,
                                        nvmlGpuInstance_t *out)
{
    const struct gi_profile *p;
    struct gpu_instance *gi = NULL;
    unsigned int k, id, j;
    nvmlReturn_t rc = gi_profile_of(device, profile, &p);
    if (rc != NVML_SUCCESS)
        return rc;
    if (device->mig_mode != 1)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (instances_of(device, profile) >= p->instances)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    for (j = 0; j < p->placement_count; j++) {
        struct placement pl = p->placements[j];
        if (at && (pl.start != at->start || pl.size != at->size))
            continue;
        if (placement_free(device, pl))
            break;
        if (at)
            return NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
    if (j == p->placement_count)
        return at ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_INSUFFICIENT_RESOURCES;
    if (hardware_refuses(device, p, &p->placements[j]))
        return NVML_ERROR_INSUFFICIENT_RESOURCES; /* compute slices or the media extension taken */
    for (k = 0; k < MAX_MIGS && !gi; k++)
        if (!instances[device->index][k].present)
            gi = &instances[device->index][k];
    if (!gi)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    /* the lowest id no GPU instance of this GPU has, from 1 */
    for (id = 1;; id++) {
        for (k = 0; k < MAX_MIGS; k++)
            if (instances[device->index][k].present && instances[device->index][k].id == id)
                break;
        if (k == MAX_MIGS)
            break;
    }
    memset(gi, 0, sizeof *gi);
    gi->present = 1;
    gi->id = id;
    gi->profile_id = profile;
    gi->start = p->placements[j].start;
    gi->size = p->placements[j].size;
    *out = gi;
    return changed(device);
}

EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profile, nvmlGpuInstance_t *gi)
{
    GPU_CALL(device, gi);
    return create_gpu_instance(device, profile, NULL, gi);
}

EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t device, unsigned int profile,
                                                             const nvmlPlacement_t *placement, nvmlGpuInstance_t *gi)
{
    struct placement at;
    GPU_CALL(device, gi);
    if (!placement)
        return NVML_ERROR_INVALID_ARGUMENT;
    at.start = placement->start;
    at.size = placement->size;
    return create_gpu_instance(device, profile, &at, gi);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstancePossiblePlacements_v2(nvmlDevice_t device, unsigned int profile,
                                                                  nvmlPlacement_t *placements, unsigned int *count)
{
    const struct gi_profile *p;
    unsigned int j;
    nvmlReturn_t rc;
    GPU_CALL(device, count);
    rc = gi_profile_of(device, profile, &p);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!placements) {
        *count = p->placement_count;
        return NVML_SUCCESS;
    }
    if (*count < p->placement_count) {
        *count = p->placement_count;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (j = 0; j < p->placement_count; j++) {
        placements[j].start = p->placements[j].start;
        placements[j].size = p->placements[j].size;
    }
    *count = p->placement_count;
    return NVML_SUCCESS;
}

/* How many more instances of the profile fit now: placed one after another at the first free placement. */
EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceRemainingCapacity(nvmlDevice_t device, unsigned int profile,
                                                              unsigned int *count)
{
    const struct gi_profile *p;
    struct placement taken[MAX_PLACEMENTS];
    unsigned int j, t, n = 0, existing;
    nvmlReturn_t rc;
    GPU_CALL(device, count);
    rc = gi_profile_of(device, profile, &p);
    if (rc != NVML_SUCCESS)
        return rc;
    existing = instances_of(device, profile);
    for (j = 0; j < p->placement_count && existing + n < p->instances; j++) {
        struct placement pl = p->placements[j];
        int clash = !placement_free(device, pl);
        for (t = 0; t < n && !clash; t++)
            clash = pl.start < taken[t].start + taken[t].size && taken[t].start < pl.start + pl.size;
        if (!clash)
            taken[n++] = pl;
    }
    *count = device->mig_mode == 1 ? n : 0;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profile, nvmlGpuInstance_t *out,
                                              unsigned int *count)
{
    const struct gi_profile *p;
    unsigned int k, n = 0;
    nvmlReturn_t rc;
    GPU_CALL(device, count);
    rc = gi_profile_of(device, profile, &p);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (k = 0; k < MAX_MIGS; k++) {
        struct gpu_instance *gi = &instances[device->index][k];
        if (!gi->present || gi->profile_id != profile)
            continue;
        if (n == *count)
            return NVML_ERROR_INSUFFICIENT_SIZE;
        out[n++] = gi;
    }
    *count = n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gi)
{
    nvmlReturn_t rc = check_gpu_instance(gi);
    if (rc != NVML_SUCCESS)
        return rc;
    if (gi->has_ci)
        return NVML_ERROR_IN_USE; /* its compute instances must be destroyed first */
    gi->present = 0;
    return changed(gi->device);
}

EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gi, unsigned int profile,
                                                         nvmlComputeInstance_t *ci)
{
    struct mock_device *d;
    struct mock_device *m;
    unsigned long long h1 = 1469598103934665603ULL, h2;
    const char *c;
    char seed[UUID_SIZE + 32];
    nvmlReturn_t rc = check_gpu_instance(gi);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!ci || profile >= CI_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    d = gi->device;
    if (!profiles[d->index][gi->profile_id].ci[profile].present)
        return NVML_ERROR_NOT_SUPPORTED;
    if (gi->has_ci)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    gi->has_ci = 1;
    gi->ci.id = 0;
    gi->ci.profile_id = profile;
    gi->ci.gi = gi;
    /* a stable UUID: FNV-1a of the GPU's UUID and the instance ids, in the MIG-<8-4-4-4-12> form */
    snprintf(seed, sizeof seed, "%s/%u/%u", d->uuid, gi->id, gi->ci.id);
    for (c = seed; *c; c++)
        h1 = (h1 ^ (unsigned char)*c) * 1099511628211ULL;
    h2 = h1;
    for (c = seed; *c; c++)
        h2 = (h2 ^ (unsigned char)*c) * 1099511628211ULL;
    m = &migs[d->index][gi - instances[d->index]];
    snprintf(m->uuid, sizeof m->uuid, "MIG-%08x-%04x-%04x-%04x-%012llx", (unsigned int)(h1 >> 32),
             (unsigned int)(h1 >> 16) & 0xffff, (unsigned int)h1 & 0xffff, (unsigned int)(h2 >> 48),
             h2 & 0xffffffffffffULL);
    *ci = &gi->ci;
    return changed(d);
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gi, unsigned int profile,
                                                       nvmlComputeInstance_t *out, unsigned int *count)
{
    nvmlReturn_t rc = check_gpu_instance(gi);
    if (rc != NVML_SUCCESS)
        return rc;
    if (!out || !count || profile >= CI_PROFILE_COUNT)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (gi->has_ci && gi->ci.profile_id == profile) {
        if (*count < 1)
            return NVML_ERROR_INSUFFICIENT_SIZE;
        out[0] = &gi->ci;
        *count = 1;
    } else {
        *count = 0;
    }
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t ci)
{
    nvmlReturn_t rc;
    if (!ci)
        return NVML_ERROR_INVALID_ARGUMENT;
    rc = check_gpu_instance(ci->gi);
    if (rc != NVML_SUCCESS)
        return rc;
    if (ci != &ci->gi->ci || !ci->gi->has_ci)
        return NVML_ERROR_INVALID_ARGUMENT;
    ci->gi->has_ci = 0;
    migs[ci->gi->device->index][ci->gi - instances[ci->gi->device->index]].uuid[0] = '\0';
    return changed(ci->gi->device);
}

/* --- events (NVIDIA's device plugin's health check) --------------------------------------------------------
 *
 * An event set is a slot of event_sets; nvmlEventSet_t holds a pointer to it, as NVML's holds its own handle. */

#define EVENT_TYPE_XID_CRITICAL_ERROR 0x8ULL /* nvmlEventTypeXidCriticalError */
#define SUPPORTED_EVENT_TYPES EVENT_TYPE_XID_CRITICAL_ERROR
#define NOT_ATTRIBUTED 0xFFFFFFFFu           /* gpuInstanceId / computeInstanceId of an event of a whole GPU */
#define MAX_EVENT_SETS 64
#define EVENT_WAIT_MAX_MS 100

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

struct event_set {
    int in_use;
    unsigned int pending;                 /* events not yet returned, in registration order */
    nvmlEventData_t events[MAX_DEVICES];
    unsigned char xid_queued[MAX_DEVICES]; /* a GPU's XID event is queued once per set */
};

typedef struct {
    struct event_set *handle;
} nvmlEventSet_t;

static struct event_set event_sets[MAX_EVENT_SETS];

/* Whether `set` is one nvmlEventSetCreate returned and nvmlEventSetFree did not free; called with `lock` held. */
static int valid_set(const struct event_set *set)
{
    uintptr_t p = (uintptr_t)set, first = (uintptr_t)event_sets;
    return p >= first && p < (uintptr_t)(event_sets + MAX_EVENT_SETS) && (p - first) % sizeof *set == 0 && set->in_use;
}

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    unsigned int i;
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&lock);
    for (i = 0; i < MAX_EVENT_SETS && event_sets[i].in_use; i++)
        ;
    if (i < MAX_EVENT_SETS) {
        memset(&event_sets[i], 0, sizeof event_sets[i]);
        event_sets[i].in_use = 1;
        set->handle = &event_sets[i];
    }
    pthread_mutex_unlock(&lock);
    return i < MAX_EVENT_SETS ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_RESOURCES;
}

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    nvmlReturn_t rc = NVML_SUCCESS;
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    pthread_mutex_lock(&lock);
    if (valid_set(set.handle))
        set.handle->in_use = 0;
    else
        rc = NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *event_types)
{
    GPU_CALL(device, event_types);
    *event_types = SUPPORTED_EVENT_TYPES;
    return NVML_SUCCESS;
}

/* A type the GPU does not support makes the call fail with NVML_ERROR_NOT_SUPPORTED, as NVML documents. */
EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long event_types, nvmlEventSet_t set)
{
    nvmlReturn_t rc;
    unsigned int index;
    GPU_CALL(device, 1);
    if (event_types & ~SUPPORTED_EVENT_TYPES)
        return NVML_ERROR_NOT_SUPPORTED;
    index = device->index;
    pthread_mutex_lock(&lock);
    rc = valid_set(set.handle) ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
    if (rc == NVML_SUCCESS && (event_types & EVENT_TYPE_XID_CRITICAL_ERROR) && device->has_xid &&
        !set.handle->xid_queued[index]) {
        nvmlEventData_t *e = &set.handle->events[set.handle->pending++];
        e->device = device;
        e->eventType = EVENT_TYPE_XID_CRITICAL_ERROR;
        e->eventData = device->xid;
        e->gpuInstanceId = e->computeInstanceId = NOT_ATTRIBUTED;
        set.handle->xid_queued[index] = 1;
    }
    pthread_mutex_unlock(&lock);
    return rc;
}

EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    nvmlReturn_t rc = NVML_SUCCESS;
    unsigned int ms = timeoutms < EVENT_WAIT_MAX_MS ? timeoutms : EVENT_WAIT_MAX_MS;
    struct timespec pause;
    int waits = 0;
    if (!state.initialised)
        return NVML_ERROR_UNINITIALIZED;
    if (!data)
        return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&lock);
    if (!valid_set(set.handle)) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
    } else if (set.handle->pending) {
        struct event_set *s = set.handle;
        *data = s->events[0];
        memmove(&s->events[0], &s->events[1], --s->pending * sizeof s->events[0]);
    } else {
        waits = 1;
    }
    pthread_mutex_unlock(&lock);
    if (!waits)
        return rc;
    pause.tv_sec = ms / 1000;
    pause.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&pause, &pause) && errno == EINTR)
        ;
    return NVML_ERROR_TIMEOUT;
}

/* --- not supported on the GPUs described here -------------------------------------------------------------- */

/* NVLink fabric (IMEX): none of ours is attached to one. */
EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, void *info)
{
    GPU_CALL(device, info);
    return NVML_ERROR_NOT_SUPPORTED;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, void *info)
{
    GPU_CALL(device, info);
    return NVML_ERROR_NOT_SUPPORTED;
}
