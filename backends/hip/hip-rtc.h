/*
 * hip-rtc.h — the AMD module's hipRTC path, for GPUs its prebuilt code objects do not cover
 * (included by hip-module.hip when built by hipcc with HX_HIP_AMD_RTC):
 *
 *   which kernels   the module is linked with --wrap=__hipRegisterFunction, so the wrapper
 *                   below sees every kernel hipcc registers (host handle, mangled name) as
 *                   the module is loaded: the exact set hx_hip_launch can be asked for;
 *   compile         hx_hip_rtc_compile: the source embedded at build time (hip-rtc-src.h,
 *                   made by hip-rtc-embed.cmake from the kernel headers), each registered
 *                   kernel added as a name expression (its demangled name), compiled with
 *                   hipRTC from the installed ROCm (found with dlopen, so a ROCm without it is
 *                   a reason, not a load failure) for one --offload-arch; writes the code
 *                   object and OUT.map ("registered-name lowered-name" per kernel: hipRTC's
 *                   int64_t is long long, so its mangled names differ from hipcc's). It runs
 *                   only in the helper process hx-hip-rtc, because the hipRTC of some ROCm
 *                   versions aborts the process on a target it does not know (ROCm 5.2 on
 *                   gfx1100 and later: munmap_chunk(): invalid pointer);
 *   cache           hx_hip_rtc_get: $XDG_CACHE_HOME/hx (else ~/.cache/hx) holds
 *                   hip-<source hash>-<gfx>-rocm<hipRTC library version>.co (+ .map); a miss
 *                   runs `hx-hip-rtc compile` (next to the module) into temporary files
 *                   renamed into place when complete; a crash or failure of the helper comes
 *                   back as a one-line reason naming the target and ROCm version; each get
 *                   marks its entry used (mtime) and removes entries unused for
 *                   HX_HIP_RTC_KEEP_DAYS days (30): older builds' and ROCm versions' objects;
 *   launch          hx_hip_rtc_load gives a device the code object (hipModuleLoadData) and a
 *                   function per kernel; hx_hip_run makes it current for its thread, and
 *                   hx_hip_launch (hip-compat.h) calls hipModuleLaunchKernel with it.
 *
 * HX_HIP_RTC=0 turns the path off; HX_HIP_RTC=force uses it for every GPU, also those with
 * prebuilt code (to test it on a GPU the build reaches).
 */
#pragma once

#include <cxxabi.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hip-rtc-src.h" /* generated: hx_hip_rtc_src, HX_HIP_RTC_HASH, HX_HIP_RTC_OPTS */

extern char **environ;

#define HX_HIP_RTC_MAX 256 /* kernels; the module registers 91 */

/* ---- the registered kernels ------------------------------------------------------------------ */

static struct {
    const void *host;
    const char *name; /* hipcc's mangled name (static storage in the module) */
} hx_hip_rtc_k[HX_HIP_RTC_MAX];
static int hx_hip_rtc_nk;
static bool hx_hip_rtc_overflow;

/* clang emits the call; the runtime's own definition returns void */
extern "C" void __real___hipRegisterFunction(void **bin, const void *host, char *dev,
                                             const char *name, unsigned int limit, void *tid,
                                             void *bid, void *bdim, void *gdim, int *wsize);
extern "C" void __wrap___hipRegisterFunction(void **bin, const void *host, char *dev,
                                             const char *name, unsigned int limit, void *tid,
                                             void *bid, void *bdim, void *gdim, int *wsize)
{
    if (hx_hip_rtc_nk < HX_HIP_RTC_MAX)
        hx_hip_rtc_k[hx_hip_rtc_nk].host = host, hx_hip_rtc_k[hx_hip_rtc_nk++].name = name;
    else
        hx_hip_rtc_overflow = true;
    __real___hipRegisterFunction(bin, host, dev, name, limit, tid, bid, bdim, gdim, wsize);
}

/* ---- hipRTC from the installed ROCm ------------------------------------------------------------ */

typedef struct hx_hiprtc_prog *hx_hiprtc_program;
static struct {
    bool tried, ok;
    char why[256];
    char version[64]; /* from the library's file name: libamdhip64.so.5.2.21153 → 5.2.21153 */
    int (*create)(hx_hiprtc_program *, const char *, const char *, int, const char **,
                  const char **);
    int (*add_name)(hx_hiprtc_program, const char *);
    int (*compile)(hx_hiprtc_program, int, const char **);
    int (*log_size)(hx_hiprtc_program, size_t *);
    int (*log)(hx_hiprtc_program, char *);
    int (*code_size)(hx_hiprtc_program, size_t *);
    int (*code)(hx_hiprtc_program, char *);
    int (*lowered)(hx_hiprtc_program, const char *, const char **);
    int (*destroy)(hx_hiprtc_program *);
    const char *(*error_string)(int);
} hx_hiprtc;

#define HX_STR_(x) #x
#define HX_STR(x) HX_STR_(x)

static bool hx_hip_rtc_api(char *err, size_t len)
{
    if (!hx_hiprtc.tried) {
        hx_hiprtc.tried = true;
        /* ROCm 5.3+ ship libhiprtc; 5.2 has hipRTC inside the runtime this module links */
        const char *libs[] = {"libhiprtc.so." HX_STR(HIP_VERSION_MAJOR),
                              "libamdhip64.so." HX_STR(HIP_VERSION_MAJOR)};
        void *h = NULL;
        for (size_t i = 0; i < sizeof libs / sizeof *libs && !h; i++) {
            h = dlopen(libs[i], RTLD_NOW | RTLD_LOCAL);
            if (h && !dlsym(h, "hiprtcCreateProgram")) h = NULL; /* left loaded: harmless */
        }
        if (!h) {
            snprintf(hx_hiprtc.why, sizeof hx_hiprtc.why,
                     "ROCm's hipRTC is not installed (neither %s nor %s has hiprtcCreateProgram)",
                     libs[0], libs[1]);
        } else {
#define HX_RTC_SYM(f, s) *(void **)&hx_hiprtc.f = dlsym(h, s)
            HX_RTC_SYM(create, "hiprtcCreateProgram");
            HX_RTC_SYM(add_name, "hiprtcAddNameExpression");
            HX_RTC_SYM(compile, "hiprtcCompileProgram");
            HX_RTC_SYM(log_size, "hiprtcGetProgramLogSize");
            HX_RTC_SYM(log, "hiprtcGetProgramLog");
            HX_RTC_SYM(code_size, "hiprtcGetCodeSize");
            HX_RTC_SYM(code, "hiprtcGetCode");
            HX_RTC_SYM(lowered, "hiprtcGetLoweredName");
            HX_RTC_SYM(destroy, "hiprtcDestroyProgram");
            HX_RTC_SYM(error_string, "hiprtcGetErrorString");
#undef HX_RTC_SYM
            hx_hiprtc.ok = hx_hiprtc.create && hx_hiprtc.add_name && hx_hiprtc.compile &&
                           hx_hiprtc.log_size && hx_hiprtc.log && hx_hiprtc.code_size &&
                           hx_hiprtc.code && hx_hiprtc.lowered && hx_hiprtc.destroy &&
                           hx_hiprtc.error_string;
            if (!hx_hiprtc.ok)
                snprintf(hx_hiprtc.why, sizeof hx_hiprtc.why,
                         "ROCm's hipRTC is incomplete (a hiprtc* function is missing)");
            Dl_info di;
            char real[PATH_MAX];
            const char *so = NULL;
            if (dladdr(*(void **)&hx_hiprtc.create, &di) && di.dli_fname &&
                realpath(di.dli_fname, real))
                so = strstr(real, ".so.");
            snprintf(hx_hiprtc.version, sizeof hx_hiprtc.version, "%s",
                     so && so[4] ? so + 4 : "unknown");
        }
    }
    if (!hx_hiprtc.ok) snprintf(err, len, "%s", hx_hiprtc.why);
    return hx_hiprtc.ok;
}

/* "void hx_hip_gemv_q<3, 1>(unsigned char const*, ...)" → "hx_hip_gemv_q<3, 1>" */
static bool hx_hip_rtc_expr(const char *mangled, char *out, size_t len)
{
    int st = 0;
    char *d = abi::__cxa_demangle(mangled, NULL, NULL, &st);
    if (!d || st != 0) return false;
    const char *s = d;
    if (!strncmp(s, "void ", 5)) s += 5;
    size_t n = 0;
    for (int depth = 0; s[n] && !(s[n] == '(' && depth == 0); n++)
        depth += s[n] == '<' ? 1 : s[n] == '>' ? -1 : 0;
    const bool ok = n > 0 && n < len;
    if (ok) snprintf(out, len, "%.*s", (int)n, s);
    free(d); /* lint: allow (__cxa_demangle's own malloc: given back with free) */
    return ok;
}

static bool hx_hip_rtc_write(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    const bool ok = fwrite(data, 1, n, f) == n;
    return fclose(f) == 0 && ok;
}

/* The helper process's work: compile for target into out and out.map. */
static int hx_hip_rtc_compile(const char *target, const char *out, char *err, size_t len)
{
    if (!hx_hip_rtc_api(err, len)) return HX_E_UNSUPPORTED;
    if (hx_hip_rtc_nk == 0 || hx_hip_rtc_overflow) {
        snprintf(err, len, "%d kernels registered by the module (%s)", hx_hip_rtc_nk,
                 hx_hip_rtc_overflow ? "more than " HX_STR(HX_HIP_RTC_MAX) : "none");
        return HX_E_INVAL;
    }
    if (!target || strncmp(target, "gfx", 3) || strlen(target) > 32 ||
        strspn(target, "gfxabcdef0123456789") != strlen(target)) {
        snprintf(err, len, "'%s' is not an AMD GPU target (gfx...)", target ? target : "");
        return HX_E_INVAL;
    }
    hx_hiprtc_program p = NULL;
    int r = hx_hiprtc.create(&p, (const char *)hx_hip_rtc_src, "hx-hip-kernels.hip", 0, NULL,
                             NULL);
    if (r != 0) {
        snprintf(err, len, "hiprtcCreateProgram: %s", hx_hiprtc.error_string(r));
        return HX_E_DEVICE;
    }
    int st = HX_OK;
    static char expr[HX_HIP_RTC_MAX][160];
    for (int i = 0; i < hx_hip_rtc_nk && st == HX_OK; i++) {
        if (!hx_hip_rtc_expr(hx_hip_rtc_k[i].name, expr[i], sizeof expr[i])) {
            snprintf(err, len, "cannot demangle kernel %s", hx_hip_rtc_k[i].name);
            st = HX_E_INVAL;
        } else if ((r = hx_hiprtc.add_name(p, expr[i])) != 0) {
            snprintf(err, len, "hiprtcAddNameExpression(%s): %s", expr[i],
                     hx_hiprtc.error_string(r));
            st = HX_E_DEVICE;
        }
    }
    /* options: --offload-arch, then HX_HIP_RTC_OPTS split at spaces */
    char arch[64], opts[] = HX_HIP_RTC_OPTS;
    const char *argv[16];
    int argc = 0;
    snprintf(arch, sizeof arch, "--offload-arch=%s", target);
    argv[argc++] = arch;
    for (char *save = NULL, *t = strtok_r(opts, " ", &save); t && argc < 16;
         t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    if (st == HX_OK && (r = hx_hiprtc.compile(p, argc, argv)) != 0) {
        size_t ln = 0;
        char first[256] = "";
        if (hx_hiprtc.log_size(p, &ln) == 0 && ln > 0) {
            char *log = (char *)hx_hip_h.malloc_fn(ln + 1);
            if (log && hx_hiprtc.log(p, log) == 0) {
                log[ln] = '\0';
                const char *e = strstr(log, "error:");
                e = e ? e : log;
                snprintf(first, sizeof first, "%.*s", (int)strcspn(e, "\n"), e);
            }
            hx_hip_h.free_fn(log);
        }
        snprintf(err, len, "hipRTC (ROCm %s) failed compiling for %s: %s%s%s", hx_hiprtc.version,
                 target, hx_hiprtc.error_string(r), first[0] ? ": " : "", first);
        st = HX_E_UNSUPPORTED;
    }
    size_t n = 0;
    char *code = NULL;
    if (st == HX_OK && (hx_hiprtc.code_size(p, &n) != 0 || n == 0 ||
                        !(code = (char *)hx_hip_h.malloc_fn(n)) || hx_hiprtc.code(p, code) != 0)) {
        snprintf(err, len, "hiprtcGetCode: no code object for %s", target);
        st = HX_E_DEVICE;
    }
    /* the map: registered name, lowered name */
    char map_path[PATH_MAX];
    snprintf(map_path, sizeof map_path, "%s.map", out);
    FILE *m = st == HX_OK ? fopen(map_path, "w") : NULL;
    if (st == HX_OK && !m) {
        snprintf(err, len, "cannot write %s: %s", map_path, strerror(errno));
        st = HX_E_IO;
    }
    for (int i = 0; m && st == HX_OK && i < hx_hip_rtc_nk; i++) {
        const char *low = NULL;
        if ((r = hx_hiprtc.lowered(p, expr[i], &low)) != 0 || !low) {
            snprintf(err, len, "hiprtcGetLoweredName(%s): %s", expr[i],
                     hx_hiprtc.error_string(r));
            st = HX_E_DEVICE;
        } else {
            fputs(hx_hip_rtc_k[i].name, m), fputc(' ', m), fputs(low, m), fputc('\n', m);
        }
    }
    if (m && fclose(m) != 0 && st == HX_OK) {
        snprintf(err, len, "cannot write %s: %s", map_path, strerror(errno));
        st = HX_E_IO;
    }
    if (st == HX_OK && !hx_hip_rtc_write(out, code, n)) {
        snprintf(err, len, "cannot write %s: %s", out, strerror(errno));
        st = HX_E_IO;
    }
    if (code) hx_hip_h.free_fn(code);
    hx_hiprtc.destroy(&p);
    return st;
}

/* ---- the cache and the helper process ---------------------------------------------------------- */

static bool hx_hip_rtc_mkdirs(char *dir)
{
    for (char *s = dir + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            const bool ok = mkdir(dir, 0755) == 0 || errno == EEXIST;
            *s = '/';
            if (!ok) return false;
        }
    return mkdir(dir, 0755) == 0 || errno == EEXIST;
}

/* The module's own file, and hx-hip-rtc next to it. */
static bool hx_hip_rtc_paths(char *module, char *helper, size_t len)
{
    Dl_info di;
    if (!dladdr((const void *)&hx_hip_rtc_k, &di) || !di.dli_fname) return false;
    snprintf(module, len, "%s", di.dli_fname);
    const char *slash = strrchr(module, '/');
    snprintf(helper, len, "%.*shx-hip-rtc", slash ? (int)(slash - module + 1) : 0, module);
    return true;
}

/* Run `hx-hip-rtc compile MODULE TARGET TMP`; its crash or failure becomes err. */
static int hx_hip_rtc_spawn(const char *target, const char *tmp, char *err, size_t len)
{
    char module[PATH_MAX], helper[PATH_MAX];
    if (!hx_hip_rtc_paths(module, helper, sizeof module)) {
        snprintf(err, len, "cannot find this module's own file (dladdr)");
        return HX_E_NOTFOUND;
    }
    if (access(helper, X_OK) != 0) {
        snprintf(err, len, "the hipRTC helper %s is missing: install it next to the module",
                 helper);
        return HX_E_NOTFOUND;
    }
    int fd[2];
    if (pipe(fd) != 0) {
        snprintf(err, len, "pipe: %s", strerror(errno));
        return HX_E_IO;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 2);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    posix_spawn_file_actions_addclose(&fa, fd[1]);
    char *const argv[] = {helper, (char *)"compile", module, (char *)target, (char *)tmp, NULL};
    pid_t pid = 0;
    const int se = posix_spawn(&pid, helper, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    if (se != 0) {
        close(fd[0]);
        snprintf(err, len, "cannot start %s: %s", helper, strerror(se));
        return HX_E_IO;
    }
    /* keep the last line the helper (or a library crashing in it) wrote */
    char buf[4096], last[320] = "", line[320] = "";
    size_t ll = 0;
    for (ssize_t n; (n = read(fd[0], buf, sizeof buf)) != 0;) {
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == '\n') {
                if (ll) line[ll] = '\0', memcpy(last, line, ll + 1);
                ll = 0;
            } else if (ll < sizeof line - 1) {
                line[ll++] = buf[i];
            }
        }
    }
    if (ll) line[ll] = '\0', memcpy(last, line, ll + 1);
    close(fd[0]);
    int ws = 0;
    pid_t w;
    while ((w = waitpid(pid, &ws, 0)) < 0 && errno == EINTR) {
    }
    if (w < 0) { /* e.g. SIGCHLD ignored by the program: the status is gone */
        snprintf(err, len, "waitpid for the hipRTC helper: %s", strerror(errno));
        return HX_E_IO;
    }
    if (WIFEXITED(ws) && WEXITSTATUS(ws) == 0) return HX_OK;
    const char *msg = strncmp(last, "hx-hip-rtc: ", 12) ? last : last + 12;
    if (WIFSIGNALED(ws))
        snprintf(err, len,
                 "hipRTC of ROCm %s crashed compiling for %s (signal %d%s%.80s): this ROCm "
                 "cannot target it (docs/hip.md: ROCm versions per target)",
                 hx_hiprtc.version, target, WTERMSIG(ws), msg[0] ? ": " : "", msg);
    else
        snprintf(err, len, "%s", msg[0] ? msg : "the hipRTC helper failed without a message");
    return HX_E_UNSUPPORTED;
}

/* Whether name is a file the cache writes: hip-<16 hex>-gfx<target>-rocm<version>.co, its
 * .map, or the temporaries of a compile, <code object>.<pid>-<hex>.tmp and .tmp.map (also the
 * <pid>.tmp of earlier builds); *tmp says which. Nothing else in the folder is ours. */
static bool hx_hip_rtc_ours(const char *n, bool *tmp)
{
    static const char hex[] = "0123456789abcdef";
    *tmp = false;
    if (strncmp(n, "hip-", 4) || strspn(n + 4, hex) != 16 || n[20] != '-') return false;
    n += 21;
    const size_t t = strncmp(n, "gfx", 3) ? 0 : strspn(n + 3, "gfxabcdef0123456789");
    if (!t || t > 29 || strncmp(n + 3 + t, "-rocm", 5)) return false;
    n += 3 + t + 5;
    const size_t v = strspn(n, "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz.");
    /* the version may hold dots: the name is ours if some ".co" ends it and a suffix follows */
    for (const char *co = strstr(n, ".co"); co && co <= n + v; co = strstr(co + 1, ".co")) {
        const char *x = co + 3;
        if (co == n) continue;
        if (!*x || !strcmp(x, ".map")) return true;
        if (*x++ != '.' || !strspn(x, "0123456789")) continue;
        x += strspn(x, "0123456789");
        if (*x == '-' && strspn(x + 1, hex)) x += 1 + strspn(x + 1, hex);
        if (!strcmp(x, ".tmp") || !strcmp(x, ".tmp.map")) return *tmp = true;
    }
    return false;
}

/* An advisory lock on the cache folder (dir/hip.lock), LOCK_SH or LOCK_EX: a get marks its
 * entry used under a shared lock and a prune removes under an exclusive one, so a prune never
 * removes an entry between another process finding it and marking it used (the loser of
 * that race finds no entry and compiles). -1 when the folder cannot hold a lock: then
 * nothing is serialized, and a get that loses the race gets a file that is gone. */
static int hx_hip_rtc_lock(const char *dir, int how)
{
    char f[PATH_MAX];
    if (snprintf(f, sizeof f, "%s/hip.lock", dir) >= (int)sizeof f) return -1;
    int fd = open(f, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) fd = open(f, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    while (flock(fd, how) != 0)
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    return fd;
}

static void hx_hip_rtc_unlock(int fd)
{
    if (fd >= 0) close(fd); /* closing the last descriptor releases the lock */
}

/* A cache hit: path and path.map exist, and are marked used now (their mtime) so that no
 * prune removes them before this process has loaded them. Under the folder's shared lock. */
static bool hx_hip_rtc_hit(const char *dir, const char *path, const char *map)
{
    const int lk = hx_hip_rtc_lock(dir, LOCK_SH);
    bool hit = utimensat(AT_FDCWD, path, NULL, 0) == 0 && utimensat(AT_FDCWD, map, NULL, 0) == 0;
    /* a cache this user may read but not write (shared, read-only): found is enough */
    if (!hit && (errno == EACCES || errno == EPERM || errno == EROFS))
        hit = access(path, R_OK) == 0 && access(map, R_OK) == 0;
    hx_hip_rtc_unlock(lk);
    return hit;
}

/* Removes the cache's files (hx_hip_rtc_ours) unused for HX_HIP_RTC_KEEP_DAYS days (default
 * 30; 0 keeps everything), and the temporaries of a compile that crashed once they are a day
 * old (a compile takes minutes: one in progress elsewhere is never that old), except path
 * and path.map. Other files in the folder are not ours and stay; a file another process
 * removed first is skipped. HX_HIP_RTC_PRUNE_PAUSE_MS (tests: a get racing a prune) waits
 * that long, holding the lock, between deciding to remove the first file and removing it. */
static void hx_hip_rtc_prune(const char *dir, const char *path)
{
    char map[PATH_MAX];
    snprintf(map, sizeof map, "%s.map", path);
    const char *s = getenv("HX_HIP_RTC_KEEP_DAYS");
    char *end = NULL;
    long days = s && *s ? strtol(s, &end, 10) : 30;
    if ((s && *s && (*end || days < 0)) || days == 0 || days > 36500) return;
    const int lk = hx_hip_rtc_lock(dir, LOCK_EX);
    DIR *d = opendir(dir);
    if (!d) {
        hx_hip_rtc_unlock(lk);
        return;
    }
    const time_t now = time(NULL);
    const char *pause = getenv("HX_HIP_RTC_PRUNE_PAUSE_MS");
    long ms = pause ? strtol(pause, NULL, 10) : 0;
    for (struct dirent *e; (e = readdir(d));) {
        bool tmp;
        if (!hx_hip_rtc_ours(e->d_name, &tmp)) continue;
        char f[PATH_MAX];
        if (snprintf(f, sizeof f, "%s/%s", dir, e->d_name) >= (int)sizeof f) continue;
        struct stat st;
        if (lstat(f, &st) != 0 || !S_ISREG(st.st_mode) ||
            now - st.st_mtime <= (tmp ? 86400L : days * 86400L) || !strcmp(f, path) ||
            !strcmp(f, map))
            continue;
        if (ms > 0 && ms <= 60000) { /* once, between deciding and removing */
            struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
            }
            ms = 0;
        }
        if (unlink(f) != 0 && errno != ENOENT)
            hx_hip_log(HX_LOG_LEVEL_WARN, "hipRTC cache: cannot remove %s: %s", f,
                       strerror(errno));
    }
    closedir(d);
    hx_hip_rtc_unlock(lk);
}

/* The code object for target: from the cache, or compiled now by the helper. path gets its
 * file; note says which ("compiled now in 2.1 s" / "from cache"). */
static int hx_hip_rtc_get(const char *target, char *path, size_t plen, char *note, size_t nlen,
                          char *err, size_t len)
{
    if (!hx_hip_rtc_api(err, len)) return HX_E_UNSUPPORTED;
    if (!target || strncmp(target, "gfx", 3) || strlen(target) > 32 ||
        strspn(target, "gfxabcdef0123456789") != strlen(target)) {
        snprintf(err, len, "'%s' is not an AMD GPU target (gfx...)", target ? target : "");
        return HX_E_INVAL;
    }
    char dir[PATH_MAX - 128];
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/')
        snprintf(dir, sizeof dir, "%s/hx", xdg);
    else if (home && home[0])
        snprintf(dir, sizeof dir, "%s/.cache/hx", home);
    else {
        snprintf(err, len, "no cache folder for hipRTC code objects (set XDG_CACHE_HOME or HOME)");
        return HX_E_NOTFOUND;
    }
    snprintf(path, plen, "%s/hip-%s-%s-rocm%s.co", dir, HX_HIP_RTC_HASH, target,
             hx_hiprtc.version);
    char map[PATH_MAX];
    snprintf(map, sizeof map, "%s.map", path);
    if (hx_hip_rtc_hit(dir, path, map)) {
        snprintf(note, nlen, "from cache");
        hx_hip_rtc_prune(dir, path);
        return HX_OK;
    }
    if (!hx_hip_rtc_mkdirs(dir)) {
        snprintf(err, len, "cannot create the cache folder %s: %s", dir, strerror(errno));
        return HX_E_IO;
    }
    /* unique also among processes of other PID namespaces sharing the folder */
    char tmp[PATH_MAX], tmp_map[PATH_MAX];
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(tmp, sizeof tmp, "%s.%d-%lx.tmp", path, (int)getpid(),
             (unsigned long)now.tv_sec * 1000003UL ^ (unsigned long)now.tv_nsec);
    snprintf(tmp_map, sizeof tmp_map, "%s.map", tmp);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int st = hx_hip_rtc_spawn(target, tmp, err, len);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    /* the map first: the code object's presence says the entry is complete */
    if (st == HX_OK && (rename(tmp_map, map) != 0 || rename(tmp, path) != 0)) {
        snprintf(err, len, "cannot store %s: %s", path, strerror(errno));
        st = HX_E_IO;
    }
    unlink(tmp);
    unlink(tmp_map);
    if (st == HX_OK) hx_hip_rtc_prune(dir, path);
    if (st == HX_OK)
        snprintf(note, nlen, "compiled now in %.1f s",
                 (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9);
    return st;
}

/* ---- a device's code object -------------------------------------------------------------------- */

struct hx_hip_rtc_mod {
    hipModule_t mod;
    hipFunction_t fn[HX_HIP_RTC_MAX]; /* by registration index */
};

static thread_local const struct hx_hip_rtc_mod *hx_hip_rtc_cur;

hipFunction_t hx_hip_rtc_function(const void *kernel)
{
    const struct hx_hip_rtc_mod *m = hx_hip_rtc_cur;
    if (!m) return NULL;
    for (int i = 0; i < hx_hip_rtc_nk; i++)
        if (hx_hip_rtc_k[i].host == kernel) return m->fn[i];
    return NULL;
}

/* Load path (and path.map) on the current device. */
static int hx_hip_rtc_load(const char *path, struct hx_hip_rtc_mod *m, char *err, size_t len)
{
    memset(m, 0, sizeof *m);
    FILE *f = fopen(path, "rb");
    char *code = NULL;
    long n = -1;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (code = (char *)hx_hip_h.malloc_fn((size_t)n)) && fread(code, 1, (size_t)n, f) != (size_t)n)
        n = -1;
    if (f) fclose(f);
    if (!code || n <= 0) {
        if (code) hx_hip_h.free_fn(code);
        snprintf(err, len, "cannot read the hipRTC code object %s", path);
        return HX_E_IO;
    }
    hipError_t e = hipModuleLoadData(&m->mod, code);
    hx_hip_h.free_fn(code);
    if (e != hipSuccess) {
        int st = hx_hip_fail(e, "hipModuleLoadData (hipRTC code object)", err, len);
        m->mod = NULL;
        return st;
    }
    char map[PATH_MAX];
    snprintf(map, sizeof map, "%s.map", path);
    FILE *mf = fopen(map, "r");
    char reg[512], low[512];
    int found = 0, st = mf ? HX_OK : HX_E_IO;
    if (!mf) snprintf(err, len, "cannot read %s", map);
    while (st == HX_OK && fscanf(mf, "%511s %511s", reg, low) == 2)
        for (int i = 0; i < hx_hip_rtc_nk; i++) {
            if (strcmp(hx_hip_rtc_k[i].name, reg) != 0 || m->fn[i]) continue;
            if ((e = hipModuleGetFunction(&m->fn[i], m->mod, low)) != hipSuccess) {
                char what[600];
                snprintf(what, sizeof what, "hipModuleGetFunction(%.500s)", low);
                st = hx_hip_fail(e, what, err, len);
            }
            found++;
            break;
        }
    if (mf) fclose(mf);
    if (st == HX_OK && found != hx_hip_rtc_nk) {
        snprintf(err, len, "%s holds %d of the module's %d kernels: delete it to recompile", map,
                 found, hx_hip_rtc_nk);
        st = HX_E_INVAL;
    }
    if (st != HX_OK) {
        HX_HIP_IGNORE(hipModuleUnload(m->mod));
        HX_HIP_IGNORE(hipGetLastError());
        memset(m, 0, sizeof *m);
    }
    return st;
}

/* HX_HIP_RTC: 0 off, 1 when no prebuilt code (default), 2 for every GPU ("force"). */
static int hx_hip_rtc_mode(void)
{
    const char *v = getenv("HX_HIP_RTC");
    if (!v || !v[0]) return 1;
    if (!strcmp(v, "0") || !strcmp(v, "off")) return 0;
    if (!strcmp(v, "force")) return 2;
    return 1;
}
