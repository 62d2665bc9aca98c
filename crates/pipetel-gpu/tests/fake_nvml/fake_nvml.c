/*
 * A fake NVIDIA Management Library for tests on machines without a GPU.
 *
 * Built as a shared library named like the real one (libnvidia-ml.so.1) and loaded by
 * nvml-wrapper through `Nvml::builder().lib_path(..)`, so the real NVML code path runs end
 * to end. It exports only the symbols pipetel-gpu's NVML source calls; nvml-wrapper resolves
 * each symbol lazily, so anything missing fails only its own call (FailedToLoadSymbol).
 *
 * State comes from `fake_nvml.txt` beside the library, read by ../fake_common/fake_state.h
 * (shared with the fake ROCm SMI library; it documents the common keys: count, log_calls,
 * delay_ms.<call>, err.<call>, <device>.err.<call>). A device key that is absent makes its
 * call return NVML_ERROR_NOT_SUPPORTED, which is how devices with different capabilities are
 * described.
 *
 *   count=2                          number of devices (default 0)
 *   err.nvmlInit_v2=9                make a call return this NVML code (any exported name)
 *   log_calls=1                      append "<device> <function>" lines to fake_nvml.calls
 *   delay_ms.nvmlInit_v2=2000        make a call block this long first (a hanging driver)
 *   0.err.nvmlDeviceGetPowerUsage=4  per-device error for one call
 *   0.uuid=GPU-...  0.name=...       identity
 *   0.util.gpu=42   0.util.mem=10    percent
 *   0.enc=5  0.dec=7                 encoder / decoder utilisation, percent
 *   0.mem.total=..  0.mem.used=..  0.mem.free=..  0.mem.reserved=..   bytes
 *   0.power=..                       milliwatts
 *   0.energy=..                      millijoules since driver load
 *   0.temp=..                        degrees Celsius
 *   0.ecc.corrected=..  0.ecc.uncorrected=..   aggregate ECC error counts
 *   0.clock.graphics=.. 0.clock.sm=.. 0.clock.mem=.. 0.clock.video=..  MHz
 *   0.fans=2  0.fan.0=30  0.fan.1=35  fan count, fan speed percent
 *   0.mig=1                          current MIG mode (absent: MIG not supported)
 *   0.pcie.tx=..  0.pcie.rx=..       KB/s
 *   0.procs=123:1048576,456:2048     running compute processes, pid:bytes
 *   0.gprocs=...                     running graphics processes, same form
 *   driver=550.54.15                 driver version (this is the default)
 *   cuda=12040                       CUDA driver API version, 1000 * major + 10 * minor (default)
 *   0.power.limit=..                 enforced power limit, milliwatts
 *   0.throttle=0x..                  current clock throttle reasons (NVML's bit flags)
 *   0.throttle.supported=0x..        supported throttle reasons (absent: NOT_SUPPORTED)
 *   0.remap=corr,unc,pending,failure remapped rows, e.g. 2,1,0,0
 *   0.retired.sbe=..  0.retired.dbe=..  pages retired (multiple single-bit / double-bit ECC)
 *   0.retired.pending=0|1            page retirement pending
 *   0.mig.uuids=MIG-..,MIG-..        UUIDs of the MIG devices (with 0.mig=1)
 *   0.mig.1.mem.total=.. 0.mig.1.mem.used=..  memory of MIG device slot 1 (its handle's
 *                                    nvmlDeviceGetMemoryInfo_v2; absent: NOT_SUPPORTED)
 *   0.mig.1.gi=5                     GPU instance id of MIG slot 1 (default: slot + 1)
 *   0.putil=pid:ts:sm:mem:enc:dec,.. process utilisation samples (timestamps in us); those
 *                                    newer than the caller's last-seen time are returned, none
 *                                    newer is NVML_ERROR_NOT_FOUND as with the real driver
 *   0.gpm=1                          GPM supported (0 or absent: the device says unsupported)
 *   0.gpm.time=10.0                  GPM: the sample clock, seconds (absent: no sample)
 *   0.gpm.sm=4.5                     GPM counters, cumulative: busy seconds for the percent
 *                                    metrics (graphics, sm, occupancy, integer, tensor, dfma,
 *                                    hmma, imma, dram, fp64, fp32, fp16), MiB for the per-second
 *                                    ones (pcie.tx, pcie.rx, nvlink.tx, nvlink.rx). A metric over
 *                                    two samples is 100 * delta / delta time (percent) or
 *                                    delta / delta time (MiB/s); absent: NOT_SUPPORTED for it
 *   0.gpm.rate.sm=0.75               GPM at a constant rate instead (no 0.gpm.time): the sample
 *                                    clock is CLOCK_MONOTONIC and each counter rate * clock, so
 *                                    any two samples give the rate (0.75: 75 %; MiB/s for the
 *                                    per-second metrics), however far apart the polls are
 *   0.mig.1.gpm.time=.. 0.mig.1.gpm.sm=..   the same per MIG slot (nvmlGpmMigSampleGet)
 *
 * Built with -DFAKE_NVML_NO_GPM the library exports no GPM symbol at all (a driver older than
 * GPM).
 *
 *   0.xids=79,13                     every XID error so far, oldest first. The device then
 *                                    accepts XID event registration (absent: NOT_SUPPORTED);
 *                                    an event set delivers each entry once, so appending a
 *                                    code to the list injects an XID mid-run.
 *
 * Compile: cc -shared -fPIC -O2 -I ../fake_common -o libnvidia-ml.so.1 fake_nvml.c -ldl
 */
#define FAKE_STATE_FILE "fake_nvml.txt"
#define FAKE_CALLS_FILE "fake_nvml.calls"
#include "fake_state.h"

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_NOT_FOUND 6
#define NVML_EVENT_TYPE_XID 0x8ULL
/* MIG device handles: MIG_HANDLE_BASE + parent * 256 + slot; GPU handles are index + 1. */
#define MIG_HANDLE_BASE 0x10000u
#define MAX_DEVICES 64
#define NVML_ERROR_UNKNOWN 999

typedef struct {
    unsigned int gpu;
    unsigned int memory;
} nvmlUtilization_t;

typedef struct {
    unsigned int version;
    unsigned long long total;
    unsigned long long reserved;
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_v2_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

static int initialized;

static int lookup_uint(int device, const char *key, unsigned int *out) {
    unsigned long long v;
    if (!lookup_u64(device, key, &v)) return 0;
    *out = (unsigned int)v;
    return 1;
}

static int device_index(nvmlDevice_t device) {
    uintptr_t h = (uintptr_t)device;
    /* A MIG handle answers for its parent. */
    if (h >= MIG_HANDLE_BASE) return (int)((h - MIG_HANDLE_BASE) / 256);
    return (int)h - 1;
}

static int is_mig_handle(nvmlDevice_t device) {
    return (uintptr_t)device >= MIG_HANDLE_BASE;
}

static int mig_slot(nvmlDevice_t device) {
    return (int)(((uintptr_t)device - MIG_HANDLE_BASE) % 256);
}

/* The `n`th (0-based) comma-separated item of `list` into `out`; 0 when there is none. */
static int list_item(const char *list, int n, char *out, size_t len) {
    const char *p = list;
    for (int i = 0; i < n; i++) {
        p = strchr(p, ',');
        if (p == NULL) return 0;
        p++;
    }
    size_t l = strcspn(p, ",");
    if (l == 0) return 0;
    snprintf(out, len, "%.*s", (int)l, p);
    return 1;
}

static int list_len(const char *list) {
    if (list == NULL || *list == '\0') return 0;
    int n = 1;
    for (const char *p = list; *p != '\0'; p++) {
        if (*p == ',') n++;
    }
    return n;
}

/* The shared prologue, then NVML's own checks: device index, initialised. Caller holds
 * `lock`. */
static nvmlReturn_t enter(int device, const char *function) {
    unsigned long long code;
    if (configured_error(device, function, &code)) return (nvmlReturn_t)code;
    if (no_such_device(device)) return NVML_ERROR_INVALID_ARGUMENT;
    if (!initialized && strcmp(function, "nvmlInit_v2") != 0) return NVML_ERROR_UNINITIALIZED;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) {
    BEGIN(-1, "nvmlInit_v2");
    initialized = 1;
    END(NVML_SUCCESS);
}

/* What nvidia-ml-py calls: the same as nvmlInit_v2 (flags ignored). */
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    BEGIN(-1, "nvmlInit_v2");
    initialized = 1;
    END(NVML_SUCCESS);
}

nvmlReturn_t nvmlShutdown(void) {
    BEGIN(-1, "nvmlShutdown");
    initialized = 0;
    END(NVML_SUCCESS);
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    BEGIN(-1, "nvmlSystemGetDriverVersion");
    const char *v = device_key(-1, "driver");
    snprintf(version, length, "%s", v != NULL ? v : "550.54.15");
    END(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    BEGIN(-1, "nvmlDeviceGetCount_v2");
    *count = 0;
    lookup_uint(-1, "count", count);
    END(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    BEGIN((int)index, "nvmlDeviceGetHandleByIndex_v2");
    /* Handles are index + 1 so that no handle is NULL. */
    *device = (nvmlDevice_t)(uintptr_t)(index + 1);
    END(NVML_SUCCESS);
}

static nvmlReturn_t get_string(nvmlDevice_t device, const char *key, char *out, unsigned int len) {
    const char *v = device_key(device_index(device), key);
    if (v == NULL) return NVML_ERROR_NOT_SUPPORTED;
    if (strlen(v) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    snprintf(out, len, "%s", v);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    BEGIN(device_index(device), "nvmlDeviceGetName");
    END(get_string(device, "name", name, length));
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    BEGIN(device_index(device), "nvmlDeviceGetUUID");
    if (is_mig_handle(device)) {
        int slot = mig_slot(device);
        const char *list = device_key(device_index(device), "mig.uuids");
        char item[MAX_VALUE];
        if (list == NULL || !list_item(list, slot, item, sizeof item)) RETURN(NVML_ERROR_NOT_FOUND);
        if (strlen(item) + 1 > length) RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
        snprintf(uuid, length, "%s", item);
        RETURN(NVML_SUCCESS);
    }
    END(get_string(device, "uuid", uuid, length));
}

nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    BEGIN(device_index(device), "nvmlDeviceGetIndex");
    *index = (unsigned int)device_index(device);
    END(NVML_SUCCESS);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    BEGIN(-1, "nvmlSystemGetCudaDriverVersion_v2");
    long long v = 12040;
    lookup_i64(-1, "cuda", &v);
    *version = (int)v;
    END(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    BEGIN(device_index(device), "nvmlDeviceGetMaxMigDeviceCount");
    const char *list = device_key(device_index(device), "mig.uuids");
    if (list == NULL) RETURN(NVML_ERROR_NOT_SUPPORTED);
    *count = (unsigned int)list_len(list);
    END(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                 nvmlDevice_t *mig) {
    BEGIN(device_index(device), "nvmlDeviceGetMigDeviceHandleByIndex");
    const char *list = device_key(device_index(device), "mig.uuids");
    if (list == NULL) RETURN(NVML_ERROR_NOT_SUPPORTED);
    if ((int)index >= list_len(list) || index >= 256) RETURN(NVML_ERROR_NOT_FOUND);
    *mig = (nvmlDevice_t)(uintptr_t)(MIG_HANDLE_BASE + (unsigned int)device_index(device) * 256u + index);
    END(NVML_SUCCESS);
}

static nvmlReturn_t get_uint(nvmlDevice_t device, const char *key, unsigned int *out) {
    return lookup_uint(device_index(device), key, out) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

static nvmlReturn_t get_u64(nvmlDevice_t device, const char *key, unsigned long long *out) {
    return lookup_u64(device_index(device), key, out) ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    BEGIN(device_index(device), "nvmlDeviceGetMigMode");
    nvmlReturn_t r = get_uint(device, "mig", current);
    if (r == NVML_SUCCESS) *pending = *current;
    END(r);
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util) {
    BEGIN(device_index(device), "nvmlDeviceGetUtilizationRates");
    nvmlReturn_t r = get_uint(device, "util.gpu", &util->gpu);
    if (r == NVML_SUCCESS) r = get_uint(device, "util.mem", &util->memory);
    END(r);
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *util,
                                             unsigned int *period_us) {
    BEGIN(device_index(device), "nvmlDeviceGetEncoderUtilization");
    *period_us = 167000;
    END(get_uint(device, "enc", util));
}

nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *util,
                                             unsigned int *period_us) {
    BEGIN(device_index(device), "nvmlDeviceGetDecoderUtilization");
    *period_us = 167000;
    END(get_uint(device, "dec", util));
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    BEGIN(device_index(device), "nvmlDeviceGetMemoryInfo_v2");
    /* The real library checks the struct version: mirror that so a layout change shows. */
    if (memory->version != (unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24))) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    char total_key[MAX_KEY] = "mem.total", used_key[MAX_KEY] = "mem.used";
    if (is_mig_handle(device)) {
        snprintf(total_key, sizeof total_key, "mig.%d.mem.total", mig_slot(device));
        snprintf(used_key, sizeof used_key, "mig.%d.mem.used", mig_slot(device));
    }
    nvmlReturn_t r = get_u64(device, total_key, &memory->total);
    if (r == NVML_SUCCESS) r = get_u64(device, used_key, &memory->used);
    if (r == NVML_SUCCESS) {
        memory->free = memory->total > memory->used ? memory->total - memory->used : 0;
        lookup_u64(device_index(device), "mem.free", &memory->free);
        memory->reserved = 0;
        lookup_u64(device_index(device), "mem.reserved", &memory->reserved);
    }
    END(r);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power) {
    BEGIN(device_index(device), "nvmlDeviceGetPowerUsage");
    END(get_uint(device, "power", power));
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy) {
    BEGIN(device_index(device), "nvmlDeviceGetTotalEnergyConsumption");
    END(get_u64(device, "energy", energy));
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp) {
    BEGIN(device_index(device), "nvmlDeviceGetTemperature");
    if (sensor != 0) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    END(get_uint(device, "temp", temp));
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type, int counter_type,
                                         unsigned long long *count) {
    BEGIN(device_index(device), "nvmlDeviceGetTotalEccErrors");
    (void)counter_type;
    END(get_u64(device, error_type == 0 ? "ecc.corrected" : "ecc.uncorrected", count));
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock) {
    BEGIN(device_index(device), "nvmlDeviceGetClockInfo");
    static const char *const keys[] = {"clock.graphics", "clock.sm", "clock.mem", "clock.video"};
    if (type < 0 || type > 3) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    END(get_uint(device, keys[type], clock));
}

nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int *fans) {
    BEGIN(device_index(device), "nvmlDeviceGetNumFans");
    END(get_uint(device, "fans", fans));
}

nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int *speed) {
    BEGIN(device_index(device), "nvmlDeviceGetFanSpeed_v2");
    char key[MAX_KEY];
    snprintf(key, sizeof key, "fan.%u", fan);
    END(get_uint(device, key, speed));
}

nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, int counter, unsigned int *value) {
    BEGIN(device_index(device), "nvmlDeviceGetPcieThroughput");
    END(get_uint(device, counter == 0 ? "pcie.tx" : "pcie.rx", value));
}

/* Parses "pid:bytes,pid:bytes" into infos; count in/out like the real call. */
static nvmlReturn_t get_processes(nvmlDevice_t device, const char *key, unsigned int *count,
                                  nvmlProcessInfo_t *infos) {
    const char *v = device_key(device_index(device), key);
    if (v == NULL) return NVML_ERROR_NOT_SUPPORTED;
    unsigned int n = 0;
    nvmlProcessInfo_t parsed[64];
    const char *p = v;
    while (*p != '\0' && n < 64) {
        char *end;
        unsigned long pid = strtoul(p, &end, 10);
        if (*end != ':') break;
        unsigned long long bytes = strtoull(end + 1, &end, 10);
        parsed[n].pid = (unsigned int)pid;
        parsed[n].usedGpuMemory = bytes;
        parsed[n].gpuInstanceId = 0xFFFFFFFFu;
        parsed[n].computeInstanceId = 0xFFFFFFFFu;
        n++;
        if (*end != ',') break;
        p = end + 1;
    }
    if (infos == NULL || *count < n) {
        *count = n;
        return n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(infos, parsed, n * sizeof(nvmlProcessInfo_t));
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
                                                     nvmlProcessInfo_t *infos) {
    BEGIN(device_index(device), "nvmlDeviceGetComputeRunningProcesses_v3");
    END(get_processes(device, "procs", count, infos));
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
                                                      nvmlProcessInfo_t *infos) {
    BEGIN(device_index(device), "nvmlDeviceGetGraphicsRunningProcesses_v3");
    END(get_processes(device, "gprocs", count, infos));
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
    BEGIN(device_index(device), "nvmlDeviceGetEnforcedPowerLimit");
    END(get_uint(device, "power.limit", limit));
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                       unsigned long long *reasons) {
    BEGIN(device_index(device), "nvmlDeviceGetCurrentClocksThrottleReasons");
    END(get_u64(device, "throttle", reasons));
}

nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t device,
                                                         unsigned long long *reasons) {
    BEGIN(device_index(device), "nvmlDeviceGetSupportedClocksThrottleReasons");
    END(get_u64(device, "throttle.supported", reasons));
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corr, unsigned int *unc,
                                       unsigned int *pending, unsigned int *failure) {
    BEGIN(device_index(device), "nvmlDeviceGetRemappedRows");
    const char *v = device_key(device_index(device), "remap");
    if (v == NULL) RETURN(NVML_ERROR_NOT_SUPPORTED);
    unsigned int values[4] = {0, 0, 0, 0};
    char item[MAX_VALUE];
    for (int i = 0; i < 4; i++) {
        if (list_item(v, i, item, sizeof item)) values[i] = (unsigned int)strtoul(item, NULL, 0);
    }
    *corr = values[0];
    *unc = values[1];
    *pending = values[2];
    *failure = values[3];
    END(NVML_SUCCESS);
}

/* The number of pages retired for `cause` (0: multiple single-bit, 1: double-bit). */
static nvmlReturn_t retired_count(nvmlDevice_t device, int cause, unsigned int *n) {
    return get_uint(device, cause == 0 ? "retired.sbe" : "retired.dbe", n);
}

/* Both retired-page queries (`timestamps` NULL for the first version), with the lock held. The
 * count query nvml-wrapper makes first: *count = 0 in, the number of pages out. */
static nvmlReturn_t retired_pages(nvmlDevice_t device, int cause, unsigned int *count,
                                  unsigned long long *addresses, unsigned long long *timestamps) {
    unsigned int n = 0;
    nvmlReturn_t r = retired_count(device, cause, &n);
    if (r != NVML_SUCCESS) return r;
    if (*count < n) {
        *count = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < n; i++) {
        addresses[i] = 0x1000ULL * (i + 1);
        if (timestamps) timestamps[i] = 1700000000ULL + i;
    }
    *count = n;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, int cause, unsigned int *count,
                                       unsigned long long *addresses) {
    BEGIN(device_index(device), "nvmlDeviceGetRetiredPages");
    END(retired_pages(device, cause, count, addresses, NULL));
}

nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device, int cause, unsigned int *count,
                                          unsigned long long *addresses,
                                          unsigned long long *timestamps) {
    BEGIN(device_index(device), "nvmlDeviceGetRetiredPages_v2");
    END(retired_pages(device, cause, count, addresses, timestamps));
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, int *pending) {
    BEGIN(device_index(device), "nvmlDeviceGetRetiredPagesPendingStatus");
    unsigned int v = 0;
    nvmlReturn_t r = get_uint(device, "retired.pending", &v);
    if (r == NVML_SUCCESS) *pending = v != 0;
    END(r);
}

/* ----- XID events ----- */

typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

struct fake_event_set {
    int registered[MAX_DEVICES];
    /* How many entries of each device's `xids` list this set has delivered. */
    int delivered[MAX_DEVICES];
};
typedef struct fake_event_set *nvmlEventSet_t;

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    BEGIN(-1, "nvmlEventSetCreate");
    *set = calloc(1, sizeof(struct fake_event_set));
    if (*set == NULL) RETURN(NVML_ERROR_UNKNOWN);
    END(NVML_SUCCESS);
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    BEGIN(-1, "nvmlEventSetFree");
    free(set);
    END(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types,
                                      nvmlEventSet_t set) {
    int d = device_index(device);
    BEGIN(d, "nvmlDeviceRegisterEvents");
    if (d >= MAX_DEVICES || !(types & NVML_EVENT_TYPE_XID)) RETURN(NVML_ERROR_NOT_SUPPORTED);
    const char *list = device_key(d, "xids");
    if (list == NULL) RETURN(NVML_ERROR_NOT_SUPPORTED);
    set->registered[d] = 1;
    /* Only XIDs after the registration are delivered, as with the real driver. */
    set->delivered[d] = list_len(list);
    END(NVML_SUCCESS);
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeout_ms) {
    BEGIN(-1, "nvmlEventSetWait_v2");
    for (int d = 0; d < MAX_DEVICES; d++) {
        if (!set->registered[d]) continue;
        const char *list = device_key(d, "xids");
        char item[MAX_VALUE];
        if (list == NULL || !list_item(list, set->delivered[d], item, sizeof item)) continue;
        set->delivered[d]++;
        data->device = (nvmlDevice_t)(uintptr_t)(d + 1);
        data->eventType = NVML_EVENT_TYPE_XID;
        data->eventData = strtoull(item, NULL, 0);
        data->gpuInstanceId = 0xFFFFFFFFu;
        data->computeInstanceId = 0xFFFFFFFFu;
        RETURN(NVML_SUCCESS);
    }
    /* Nothing queued: wait out the timeout (without the lock), as the real call does. */
    pthread_mutex_unlock(&lock);
    struct timespec ts = {(time_t)(timeout_ms / 1000), (long)(timeout_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
    return NVML_ERROR_TIMEOUT;
    END(NVML_ERROR_TIMEOUT);
}

/* MIG instance ids, process utilisation and GPM. */
#include "fake_nvml_activity.h"
