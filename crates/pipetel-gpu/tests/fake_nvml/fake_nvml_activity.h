/*
 * The fake NVML's MIG GPU-instance ids, process utilisation samples and GPM (GPU Performance
 * Monitoring), included at the end of fake_nvml.c (its state keys are documented there).
 */
#ifndef PIPETEL_FAKE_NVML_ACTIVITY_H
#define PIPETEL_FAKE_NVML_ACTIVITY_H

/* ----- MIG GPU instance ids ----- */

/* The GPU instance id of MIG slot `slot` of `device`: `<d>.mig.<slot>.gi`, else slot + 1. */
static unsigned int mig_gi(int device, int slot) {
    char key[MAX_KEY];
    snprintf(key, sizeof key, "mig.%d.gi", slot);
    unsigned long long gi = (unsigned long long)slot + 1;
    lookup_u64(device, key, &gi);
    return (unsigned int)gi;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    BEGIN(device_index(device), "nvmlDeviceGetGpuInstanceId");
    if (!is_mig_handle(device)) RETURN(NVML_ERROR_NOT_SUPPORTED);
    *id = mig_gi(device_index(device), mig_slot(device));
    END(NVML_SUCCESS);
}

/* ----- process utilisation ----- */

typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *out,
                                             unsigned int *count, unsigned long long last_seen) {
    BEGIN(device_index(device), "nvmlDeviceGetProcessUtilization");
    const char *v = device_key(device_index(device), "putil");
    if (v == NULL) RETURN(NVML_ERROR_NOT_SUPPORTED);
    nvmlProcessUtilizationSample_t parsed[64];
    unsigned int n = 0;
    char item[MAX_VALUE];
    for (int i = 0; n < 64 && list_item(v, i, item, sizeof item); i++) {
        nvmlProcessUtilizationSample_t p;
        if (sscanf(item, "%u:%llu:%u:%u:%u:%u", &p.pid, &p.timeStamp, &p.smUtil, &p.memUtil, &p.encUtil,
                   &p.decUtil) != 6) {
            continue;
        }
        if (p.timeStamp > last_seen) parsed[n++] = p;
    }
    if (n == 0) RETURN(NVML_ERROR_NOT_FOUND);
    if (out == NULL || *count < n) {
        *count = n;
        RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    memcpy(out, parsed, n * sizeof parsed[0]);
    *count = n;
    END(NVML_SUCCESS);
}

/* ----- GPM (GPU Performance Monitoring) ----- */
#ifndef FAKE_NVML_NO_GPM

#define GPM_IDS 256
#define NVML_GPM_METRIC_MAX 210
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25

typedef struct {
    unsigned int version;
    unsigned int isSupportedDevice;
} nvmlGpmSupport_t;

struct fake_gpm_sample {
    int filled;
    double time;
    double value[GPM_IDS];
    unsigned char have[GPM_IDS];
};
typedef struct fake_gpm_sample *nvmlGpmSample_t;

typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    struct {
        char *shortName;
        char *longName;
        char *unit;
    } metricInfo;
} nvmlGpmMetric_t;

typedef struct {
    unsigned int version;
    unsigned int numMetrics;
    nvmlGpmSample_t sample1;
    nvmlGpmSample_t sample2;
    nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

/* NVML's metric ids, the state key of each, and whether it is a rate (MiB/s) or a percent. */
static const struct {
    unsigned int id;
    const char *key;
    int per_second;
} GPM_KEYS[] = {
    {1, "graphics", 0}, {2, "sm", 0},      {3, "occupancy", 0}, {4, "integer", 0},
    {5, "tensor", 0},   {6, "dfma", 0},    {7, "hmma", 0},      {9, "imma", 0},
    {10, "dram", 0},    {11, "fp64", 0},   {12, "fp32", 0},     {13, "fp16", 0},
    {20, "pcie.tx", 1}, {21, "pcie.rx", 1}, {60, "nvlink.rx", 1}, {61, "nvlink.tx", 1},
};
#define GPM_KEY_COUNT ((int)(sizeof GPM_KEYS / sizeof GPM_KEYS[0]))

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *support) {
    BEGIN(device_index(device), "nvmlGpmQueryDeviceSupport");
    if (support->version != 1) RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    unsigned int on = 0;
    lookup_uint(device_index(device), "gpm", &on);
    support->isSupportedDevice = on != 0;
    END(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *sample) {
    BEGIN(-1, "nvmlGpmSampleAlloc");
    *sample = calloc(1, sizeof(struct fake_gpm_sample));
    if (*sample == NULL) RETURN(NVML_ERROR_UNKNOWN);
    END(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
    BEGIN(-1, "nvmlGpmSampleFree");
    free(sample);
    END(NVML_SUCCESS);
}

/* Fills `sample` from the keys under `prefix` (`gpm.` or `mig.<slot>.gpm.`) of `device`. */
static nvmlReturn_t fill_sample(int device, const char *prefix, nvmlGpmSample_t sample) {
    unsigned int on = 0;
    if (!lookup_uint(device, "gpm", &on) || !on) return NVML_ERROR_NOT_SUPPORTED;
    char key[MAX_KEY];
    snprintf(key, sizeof key, "%stime", prefix);
    const char *t = device_key(device, key);
    /* Without a time: counters at constant rates on the monotonic clock. */
    int rates = t == NULL;
    memset(sample, 0, sizeof *sample);
    if (rates) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        sample->time = (double)now.tv_sec + (double)now.tv_nsec / 1e9;
    } else {
        sample->time = strtod(t, NULL);
    }
    int found = 0;
    for (int i = 0; i < GPM_KEY_COUNT; i++) {
        snprintf(key, sizeof key, "%s%s%s", prefix, rates ? "rate." : "", GPM_KEYS[i].key);
        const char *v = device_key(device, key);
        if (v == NULL) continue;
        double x = strtod(v, NULL);
        sample->value[GPM_KEYS[i].id] = rates ? x * sample->time : x;
        sample->have[GPM_KEYS[i].id] = 1;
        found = 1;
    }
    if (rates && !found) return NVML_ERROR_NOT_SUPPORTED;
    sample->filled = 1;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t sample) {
    BEGIN(device_index(device), "nvmlGpmSampleGet");
    if (sample == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    END(fill_sample(device_index(device), "gpm.", sample));
}

nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gi, nvmlGpmSample_t sample) {
    int d = device_index(device);
    BEGIN(d, "nvmlGpmMigSampleGet");
    if (sample == NULL) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    const char *list = device_key(d, "mig.uuids");
    int slots = list_len(list);
    for (int slot = 0; slot < slots; slot++) {
        if (mig_gi(d, slot) != gi) continue;
        char prefix[MAX_KEY];
        snprintf(prefix, sizeof prefix, "mig.%d.gpm.", slot);
        RETURN(fill_sample(d, prefix, sample));
    }
    END(NVML_ERROR_NOT_FOUND);
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *get) {
    BEGIN(-1, "nvmlGpmMetricsGet");
    if (get->version != 1) RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (get->numMetrics > NVML_GPM_METRIC_MAX || get->sample1 == NULL || get->sample2 == NULL ||
        !get->sample1->filled || !get->sample2->filled) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    double dt = get->sample2->time - get->sample1->time;
    if (dt <= 0) RETURN(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < get->numMetrics; i++) {
        nvmlGpmMetric_t *m = &get->metrics[i];
        m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        m->value = 0;
        m->metricInfo.shortName = NULL;
        m->metricInfo.longName = NULL;
        m->metricInfo.unit = NULL;
        for (int k = 0; k < GPM_KEY_COUNT; k++) {
            unsigned int id = GPM_KEYS[k].id;
            if (id != m->metricId || !get->sample1->have[id] || !get->sample2->have[id]) continue;
            double delta = (get->sample2->value[id] - get->sample1->value[id]) / dt;
            m->value = GPM_KEYS[k].per_second ? delta : 100.0 * delta;
            m->nvmlReturn = NVML_SUCCESS;
            m->metricInfo.shortName = (char *)GPM_KEYS[k].key;
            m->metricInfo.unit = (char *)(GPM_KEYS[k].per_second ? "MiB/sec" : "%");
        }
    }
    END(NVML_SUCCESS);
}

#endif

#endif
