/*
 * What the fake vendor libraries (fake_nvml.c, fake_rocm_smi.c) share: the state file they
 * read their devices from, the call log, configured delays and configured errors.
 *
 * Define FAKE_STATE_FILE and FAKE_CALLS_FILE (file names) before including this header.
 *
 * The state comes from FAKE_STATE_FILE in the directory the library was loaded from (found
 * with dladdr), so each copy of the library in its own directory is an independent fake, even
 * when several are loaded in one process. The file is re-read whenever its inode, size or
 * modification time changes: tests rewrite it atomically (write a temporary file, rename it)
 * between polls.
 *
 * Format: one `key=value` per line, `#` starts a comment. Device keys are prefixed by the
 * device index and a dot. Keys every fake understands:
 *
 *   count=2                      number of devices (default 0)
 *   log_calls=1                  append "<device> <function>" lines to FAKE_CALLS_FILE
 *   delay_ms.<function>=2000     make a call block this long first (a hanging driver)
 *   err.<function>=9             make a call return this code
 *   0.err.<function>=4           the same for one device (checked first)
 *
 * Numbers are read with base 0: decimal, or hex with 0x.
 */
#ifndef PIPETEL_FAKE_STATE_H
#define PIPETEL_FAKE_STATE_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_ENTRIES 512
#define MAX_KEY 96
#define MAX_VALUE 512

struct entry {
    char key[MAX_KEY];
    char value[MAX_VALUE];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry entries[MAX_ENTRIES];
static int entry_count;
static char state_path[PATH_MAX];
static char calls_path[PATH_MAX];
static struct stat loaded_stat;
static int have_loaded;

static void find_paths(void) {
    if (state_path[0] != '\0') return;
    Dl_info info;
    const char *dir_end = NULL;
    if (dladdr((void *)&find_paths, &info) != 0 && info.dli_fname != NULL) {
        dir_end = strrchr(info.dli_fname, '/');
    }
    if (dir_end == NULL) {
        snprintf(state_path, sizeof state_path, FAKE_STATE_FILE);
        snprintf(calls_path, sizeof calls_path, FAKE_CALLS_FILE);
        return;
    }
    int dir_len = (int)(dir_end - info.dli_fname);
    snprintf(state_path, sizeof state_path, "%.*s/" FAKE_STATE_FILE, dir_len, info.dli_fname);
    snprintf(calls_path, sizeof calls_path, "%.*s/" FAKE_CALLS_FILE, dir_len, info.dli_fname);
}

/* Re-reads the state file when it changed. Caller holds `lock`. */
static void refresh(void) {
    find_paths();
    struct stat st;
    if (stat(state_path, &st) != 0) {
        entry_count = 0;
        have_loaded = 0;
        return;
    }
    if (have_loaded && st.st_ino == loaded_stat.st_ino && st.st_size == loaded_stat.st_size &&
        st.st_mtim.tv_sec == loaded_stat.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == loaded_stat.st_mtim.tv_nsec) {
        return;
    }
    FILE *f = fopen(state_path, "r");
    if (f == NULL) return;
    entry_count = 0;
    char line[MAX_KEY + MAX_VALUE + 4];
    while (fgets(line, sizeof line, f) != NULL && entry_count < MAX_ENTRIES) {
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0') continue;
        char *eq = strchr(line, '=');
        if (eq == NULL) continue;
        *eq = '\0';
        snprintf(entries[entry_count].key, MAX_KEY, "%.*s", MAX_KEY - 1, line);
        snprintf(entries[entry_count].value, MAX_VALUE, "%.*s", MAX_VALUE - 1, eq + 1);
        entry_count++;
    }
    fclose(f);
    loaded_stat = st;
    have_loaded = 1;
}

/* The value of `key` for `device` (-1: a global key); the last line wins. */
static const char *device_key(int device, const char *key) {
    char buf[MAX_KEY];
    if (device < 0) {
        snprintf(buf, sizeof buf, "%s", key);
    } else {
        snprintf(buf, sizeof buf, "%d.%s", device, key);
    }
    for (int i = entry_count - 1; i >= 0; i--) {
        if (strcmp(entries[i].key, buf) == 0) return entries[i].value;
    }
    return NULL;
}

static int lookup_u64(int device, const char *key, unsigned long long *out) {
    const char *v = device_key(device, key);
    if (v == NULL) return 0;
    *out = strtoull(v, NULL, 0);
    return 1;
}

static inline int lookup_i64(int device, const char *key, long long *out) {
    const char *v = device_key(device, key);
    if (v == NULL) return 0;
    *out = strtoll(v, NULL, 10);
    return 1;
}

/*
 * The common prologue of every call: refresh the state, log the call, wait if told to, and
 * find a configured error (per device first, then global). Returns 1 and sets `code` when
 * the call must fail with it. Caller holds `lock`.
 */
static int configured_error(int device, const char *function, unsigned long long *code) {
    refresh();
    unsigned long long log_calls = 0;
    lookup_u64(-1, "log_calls", &log_calls);
    if (log_calls) {
        FILE *f = fopen(calls_path, "a");
        if (f != NULL) {
            fprintf(f, "%d %s\n", device, function);
            fclose(f);
        }
    }
    char key[MAX_KEY];
    unsigned long long delay_ms;
    snprintf(key, sizeof key, "delay_ms.%s", function);
    if (lookup_u64(-1, key, &delay_ms)) {
        struct timespec ts = {(time_t)(delay_ms / 1000), (long)(delay_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    snprintf(key, sizeof key, "err.%s", function);
    if (device >= 0 && lookup_u64(device, key, code)) return 1;
    return lookup_u64(-1, key, code);
}

/* Whether `device` is beyond the configured `count`. */
static int no_such_device(int device) {
    unsigned long long count = 0;
    lookup_u64(-1, "count", &count);
    return device >= 0 && (unsigned long long)device >= count;
}

/*
 * Call bodies: BEGIN(device, "name") takes the lock and runs the library's own
 * `enter(device, name)`; a non-zero status jumps to END, which unlocks and returns the
 * status. RETURN(status) leaves early; END(status) must close every body.
 */
#define BEGIN(dev, name)                      \
    pthread_mutex_lock(&lock);                \
    int ret_ = (int)enter((int)(dev), (name)); \
    if (ret_ != 0) goto done_;

#define RETURN(ret)    \
    do {               \
        ret_ = (ret);  \
        goto done_;    \
    } while (0)

#define END(ret)                 \
    ret_ = (ret);                \
    done_:                       \
    pthread_mutex_unlock(&lock); \
    return ret_;

#endif
