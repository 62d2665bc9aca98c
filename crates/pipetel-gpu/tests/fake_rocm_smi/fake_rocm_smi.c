/*
 * A fake ROCm SMI library (librocm_smi64) for tests on machines without an AMD GPU.
 *
 * Built as a shared library named like the real one (librocm_smi64.so.1) and loaded by
 * pipetel-gpu's ROCm source with dlopen, so the real ROCm code path runs end to end. It
 * exports only the symbols that source calls; the source resolves each one on its own, so a
 * symbol this file leaves out makes only its own field unsupported.
 *
 * State comes from `fake_rocm_smi.txt` beside the library, read by
 * ../fake_common/fake_state.h (shared with the fake NVML; it documents the common keys:
 * count, log_calls, delay_ms.<call>, err.<call>, <device>.err.<call>). A device key that is
 * absent makes its call return RSMI_STATUS_NOT_SUPPORTED (2), which is how devices with
 * different capabilities are described.
 *
 *   count=2                        number of devices (default 0)
 *   layout=6                       rsmi_frequencies_t as ROCm 6 and later lay it out
 *                                  (has_deep_sleep first, 33 entries); default: ROCm 5
 *   err.rsmi_init=8                make a call return this status (any exported name)
 *   log_calls=1                    append "<device> <function>" lines to fake_rocm_smi.calls
 *   delay_ms.rsmi_init=2000        make a call block this long first
 *   0.err.rsmi_dev_busy_percent_get=16   per-device status for one call
 *   0.unique_id=0x18f68e602b8a790f  0.pci_id=..  0.name=..   identity
 *   0.busy=42                      GPU busy percent
 *   0.vram.total=..  0.vram.used=..          bytes
 *   0.power.ave=..                 average power, microwatts (rsmi_dev_power_ave_get)
 *   0.power.socket=..              current socket power, microwatts (ROCm 6 call)
 *   0.energy.count=..  0.energy.resolution=15.3   counter ticks, microjoules per tick
 *   0.temp.edge=..  0.temp.junction=..       millidegrees Celsius
 *   0.ecc.enabled=5                mask of RAS blocks with ECC enabled
 *   0.ecc.1.corrected=..  0.ecc.1.uncorrected=..  counts of the block with that mask bit
 *   0.clk.sys=500000000,1700000000  0.clk.sys.current=1   supported clocks (Hz), current index
 *   0.clk.mem=..  0.clk.mem.current=..       same for the memory clock
 *   0.fan=128                      fan 0 speed, 0-255 (RSMI_MAX_FAN_SPEED)
 *
 * Compile: cc -shared -fPIC -O2 -I ../fake_common -o librocm_smi64.so.1 fake_rocm_smi.c -ldl
 */
#define FAKE_STATE_FILE "fake_rocm_smi.txt"
#define FAKE_CALLS_FILE "fake_rocm_smi.calls"
#include "fake_state.h"

#include <stdbool.h>
#include <stddef.h>

typedef uint32_t rsmi_status_t;

#define RSMI_STATUS_SUCCESS 0
#define RSMI_STATUS_INVALID_ARGS 1
#define RSMI_STATUS_NOT_SUPPORTED 2
#define RSMI_STATUS_INPUT_OUT_OF_BOUNDS 7
#define RSMI_STATUS_INIT_ERROR 8
#define RSMI_STATUS_INSUFFICIENT_SIZE 11

#define CLK_TYPE_SYS 0
#define CLK_TYPE_MEM 4
#define MEM_TYPE_VRAM 0
#define TEMP_TYPE_EDGE 0
#define TEMP_TYPE_JUNCTION 1
#define TEMP_CURRENT 0

typedef struct {
    uint64_t correctable_err;
    uint64_t uncorrectable_err;
} rsmi_error_count_t;

/* rsmi_frequencies_t up to ROCm 5. */
typedef struct {
    uint32_t num_supported;
    uint32_t current;
    uint64_t frequency[32];
} freq_v5_t;

/* rsmi_frequencies_t from ROCm 6 on. */
typedef struct {
    bool has_deep_sleep;
    uint32_t num_supported;
    uint32_t current;
    uint64_t frequency[33];
} freq_v6_t;

static int init_count;

/* The shared prologue, then ROCm SMI's own checks: initialised, device index. Caller holds
 * `lock`. */
static rsmi_status_t enter(int device, const char *function) {
    unsigned long long code;
    if (configured_error(device, function, &code)) return (rsmi_status_t)code;
    if (strcmp(function, "rsmi_init") != 0 && init_count == 0) return RSMI_STATUS_INIT_ERROR;
    if (no_such_device(device)) return RSMI_STATUS_INVALID_ARGS;
    return RSMI_STATUS_SUCCESS;
}

static rsmi_status_t get_u64(uint32_t dv, const char *key, uint64_t *out) {
    unsigned long long v;
    if (!lookup_u64((int)dv, key, &v)) return RSMI_STATUS_NOT_SUPPORTED;
    *out = v;
    return RSMI_STATUS_SUCCESS;
}

static rsmi_status_t get_i64(uint32_t dv, const char *key, int64_t *out) {
    long long v;
    if (!lookup_i64((int)dv, key, &v)) return RSMI_STATUS_NOT_SUPPORTED;
    *out = v;
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_init(uint64_t flags) {
    (void)flags;
    BEGIN(-1, "rsmi_init");
    init_count++;
    END(RSMI_STATUS_SUCCESS);
}

rsmi_status_t rsmi_shut_down(void) {
    BEGIN(-1, "rsmi_shut_down");
    if (init_count > 0) init_count--;
    END(RSMI_STATUS_SUCCESS);
}

rsmi_status_t rsmi_status_string(rsmi_status_t status, const char **text) {
    switch (status) {
        case RSMI_STATUS_SUCCESS: *text = "RSMI_STATUS_SUCCESS: The function has been executed successfully."; break;
        case RSMI_STATUS_NOT_SUPPORTED: *text = "RSMI_STATUS_NOT_SUPPORTED: The requested information or action is not available for the given input"; break;
        case RSMI_STATUS_INIT_ERROR: *text = "RSMI_STATUS_INIT_ERROR: An error occurred during initialization, during monitor discovery or when when initializing internal data structures"; break;
        default: *text = "An unknown error occurred"; break;
    }
    return RSMI_STATUS_SUCCESS;
}

rsmi_status_t rsmi_num_monitor_devices(uint32_t *num_devices) {
    BEGIN(-1, "rsmi_num_monitor_devices");
    unsigned long long count = 0;
    lookup_u64(-1, "count", &count);
    *num_devices = (uint32_t)count;
    END(RSMI_STATUS_SUCCESS);
}

rsmi_status_t rsmi_dev_name_get(uint32_t dv, char *name, size_t len) {
    BEGIN(dv, "rsmi_dev_name_get");
    const char *v = device_key((int)dv, "name");
    rsmi_status_t r = RSMI_STATUS_NOT_SUPPORTED;
    if (v != NULL) {
        /* Like the real library: truncate and say so. */
        snprintf(name, len, "%s", v);
        r = strlen(v) + 1 > len ? RSMI_STATUS_INSUFFICIENT_SIZE : RSMI_STATUS_SUCCESS;
    }
    END(r);
}

rsmi_status_t rsmi_dev_unique_id_get(uint32_t dv, uint64_t *id) {
    BEGIN(dv, "rsmi_dev_unique_id_get");
    END(get_u64(dv, "unique_id", id));
}

rsmi_status_t rsmi_dev_pci_id_get(uint32_t dv, uint64_t *bdfid) {
    BEGIN(dv, "rsmi_dev_pci_id_get");
    END(get_u64(dv, "pci_id", bdfid));
}

rsmi_status_t rsmi_dev_busy_percent_get(uint32_t dv, uint32_t *percent) {
    BEGIN(dv, "rsmi_dev_busy_percent_get");
    uint64_t v = 0;
    rsmi_status_t r = get_u64(dv, "busy", &v);
    if (r == RSMI_STATUS_SUCCESS) *percent = (uint32_t)v;
    END(r);
}

rsmi_status_t rsmi_dev_memory_total_get(uint32_t dv, uint32_t mem_type, uint64_t *total) {
    BEGIN(dv, "rsmi_dev_memory_total_get");
    rsmi_status_t r = mem_type == MEM_TYPE_VRAM ? get_u64(dv, "vram.total", total) : RSMI_STATUS_NOT_SUPPORTED;
    END(r);
}

rsmi_status_t rsmi_dev_memory_usage_get(uint32_t dv, uint32_t mem_type, uint64_t *used) {
    BEGIN(dv, "rsmi_dev_memory_usage_get");
    rsmi_status_t r = mem_type == MEM_TYPE_VRAM ? get_u64(dv, "vram.used", used) : RSMI_STATUS_NOT_SUPPORTED;
    END(r);
}

rsmi_status_t rsmi_dev_power_ave_get(uint32_t dv, uint32_t sensor, uint64_t *power) {
    BEGIN(dv, "rsmi_dev_power_ave_get");
    rsmi_status_t r = sensor == 0 ? get_u64(dv, "power.ave", power) : RSMI_STATUS_INVALID_ARGS;
    END(r);
}

rsmi_status_t rsmi_dev_current_socket_power_get(uint32_t dv, uint64_t *power) {
    BEGIN(dv, "rsmi_dev_current_socket_power_get");
    END(get_u64(dv, "power.socket", power));
}

rsmi_status_t rsmi_dev_energy_count_get(uint32_t dv, uint64_t *count, float *resolution, uint64_t *timestamp) {
    BEGIN(dv, "rsmi_dev_energy_count_get");
    rsmi_status_t r = get_u64(dv, "energy.count", count);
    if (r == RSMI_STATUS_SUCCESS) {
        const char *res = device_key((int)dv, "energy.resolution");
        *resolution = res != NULL ? strtof(res, NULL) : 15.3f;
        *timestamp = 0;
    }
    END(r);
}

rsmi_status_t rsmi_dev_temp_metric_get(uint32_t dv, uint32_t sensor, uint32_t metric, int64_t *temperature) {
    BEGIN(dv, "rsmi_dev_temp_metric_get");
    rsmi_status_t r = RSMI_STATUS_NOT_SUPPORTED;
    if (metric == TEMP_CURRENT && sensor == TEMP_TYPE_EDGE) {
        r = get_i64(dv, "temp.edge", temperature);
    } else if (metric == TEMP_CURRENT && sensor == TEMP_TYPE_JUNCTION) {
        r = get_i64(dv, "temp.junction", temperature);
    }
    END(r);
}

rsmi_status_t rsmi_dev_ecc_enabled_get(uint32_t dv, uint64_t *blocks) {
    BEGIN(dv, "rsmi_dev_ecc_enabled_get");
    END(get_u64(dv, "ecc.enabled", blocks));
}

rsmi_status_t rsmi_dev_ecc_count_get(uint32_t dv, uint64_t block, rsmi_error_count_t *ec) {
    BEGIN(dv, "rsmi_dev_ecc_count_get");
    char key[MAX_KEY];
    snprintf(key, sizeof key, "ecc.%llu.corrected", (unsigned long long)block);
    rsmi_status_t r = get_u64(dv, key, &ec->correctable_err);
    if (r == RSMI_STATUS_SUCCESS) {
        snprintf(key, sizeof key, "ecc.%llu.uncorrected", (unsigned long long)block);
        ec->uncorrectable_err = 0;
        get_u64(dv, key, &ec->uncorrectable_err);
    }
    END(r);
}

rsmi_status_t rsmi_dev_gpu_clk_freq_get(uint32_t dv, uint32_t clk_type, void *out) {
    BEGIN(dv, "rsmi_dev_gpu_clk_freq_get");
    const char *name = clk_type == CLK_TYPE_SYS ? "clk.sys" : clk_type == CLK_TYPE_MEM ? "clk.mem" : NULL;
    const char *list = name != NULL ? device_key((int)dv, name) : NULL;
    rsmi_status_t r = RSMI_STATUS_NOT_SUPPORTED;
    if (list != NULL) {
        uint64_t freqs[33];
        uint32_t n = 0;
        const char *p = list;
        while (*p != '\0' && n < 33) {
            char *end;
            freqs[n++] = strtoull(p, &end, 10);
            if (*end != ',') break;
            p = end + 1;
        }
        char key[MAX_KEY];
        snprintf(key, sizeof key, "%s.current", name);
        unsigned long long current = 0;
        lookup_u64((int)dv, key, &current);
        unsigned long long layout = 5;
        lookup_u64(-1, "layout", &layout);
        if (layout >= 6) {
            freq_v6_t *f = out;
            f->has_deep_sleep = false;
            f->num_supported = n;
            f->current = (uint32_t)current;
            memcpy(f->frequency, freqs, n * sizeof(uint64_t));
        } else {
            freq_v5_t *f = out;
            if (n > 32) n = 32;
            f->num_supported = n;
            f->current = (uint32_t)current;
            memcpy(f->frequency, freqs, n * sizeof(uint64_t));
        }
        r = RSMI_STATUS_SUCCESS;
    }
    END(r);
}

rsmi_status_t rsmi_dev_fan_speed_get(uint32_t dv, uint32_t sensor, int64_t *speed) {
    BEGIN(dv, "rsmi_dev_fan_speed_get");
    rsmi_status_t r = RSMI_STATUS_NOT_SUPPORTED;
    if (sensor == 0) r = get_i64(dv, "fan", speed);
    END(r);
}
