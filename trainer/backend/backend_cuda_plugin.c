/* The CUDA backend as a plugin, loaded on first use.
 *
 * Linking cuSPARSE (156 MB) and the CUDA runtime into fsgd cost every
 * process about 40 MB of memory and 0.03-0.2 s at start, GPU or not: more
 * than `fsgd train` spends on a small data set. So backend_cuda.cu is built
 * into its own shared object (Makefile: lib/fsgd/backend_cuda.so beside
 * bin/) and loaded here, once, the first time the cuda backend is asked for.
 *
 * Where from: $FSGD_CUDA_PLUGIN when set; else DIR/../lib/fsgd/backend_cuda.so
 * where DIR holds the running executable (bin/fsgd in the tree,
 * /usr/local/bin/fsgd in the images); else the path the build wrote it to
 * (for test and bench binaries, which live elsewhere).
 *
 * The plugin calls a few fsgd functions; it finds them in the executable,
 * which is linked with -rdynamic. `plugin_needs` keeps them in every
 * executable that links this file, even one that never calls them itself. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_cuda.h"
#include "backend_impl.h"
#include "fsgd/error.h"

#ifndef FSGD_CUDA_TOOLKIT
#define FSGD_CUDA_TOOLKIT "unknown"
#endif

const int fsgd_backend_cuda_built = FSGD_HAVE_CUDA;

/* Why the backend cannot run, with the fsgd error code to report it under. */
static char why_not[PATH_MAX + 400] = "cuda: built without CUDA (rebuild with nvcc, make CUDA=1)";
static int why_code = FSGD_E_NOT_BUILT;

static int cuda_unavailable(char *err, size_t errsz)
{
    fsgd_err_fmt(err, errsz, why_code, "%s", why_not);
    return 0;
}

static const fsgd_backend_ops_t unavailable_ops = {.name = "cuda", .available = cuda_unavailable};

#if FSGD_HAVE_CUDA
#include "fastsgd_device.h"
#include "fsgd/codec.h"
#include "fsgd/fastsgd.h"
#include "fsgd/loss.h"
#include "fsgd/sparse.h"

/* What `nm -u` lists for backend_cuda.cu.o. */
__attribute__((used)) static void (*const plugin_needs[])(void) = {
    (void (*)(void))fsgd_codec_encode,     (void (*)(void))fsgd_err_fmt,          (void (*)(void))fsgd_fastsgd_finish,
    (void (*)(void))fsgd_fsd_params,       (void (*)(void))fsgd_fsd_plan_make,    (void (*)(void))fsgd_fsd_write_header,
    (void (*)(void))fsgd_loss_value,       (void (*)(void))fsgd_sparse_free,      (void (*)(void))fsgd_sparse_reserve,
};

#ifndef FSGD_CUDA_PLUGIN_BUILT
#define FSGD_CUDA_PLUGIN_BUILT "lib/fsgd/backend_cuda.so"
#endif

typedef int (*probe_fn)(const fsgd_csr_t *X, int reps, fsgd_cuda_probe_t *out, char *err, size_t errsz);

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static const fsgd_backend_ops_t *cuda_ops = &unavailable_ops;
static const char *plugin_info;
static probe_fn plugin_probe;
static char plugin_path[PATH_MAX + 64];

/* The plugin's path into plugin_path (see the top of this file). */
static void find_plugin(void)
{
    const char *env = getenv("FSGD_CUDA_PLUGIN");
    if (env && *env) {
        snprintf(plugin_path, sizeof plugin_path, "%s", env);
        return;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(plugin_path, sizeof plugin_path, "%s/../lib/fsgd/backend_cuda.so", exe);
            if (access(plugin_path, F_OK) == 0)
                return;
        }
    }
    snprintf(plugin_path, sizeof plugin_path, "%s", FSGD_CUDA_PLUGIN_BUILT);
}

static void *symbol(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p)
        snprintf(why_not, sizeof why_not, "cuda: %s has no symbol %s: not an fsgd CUDA plugin", plugin_path, name);
    return p;
}

static void load_plugin(void)
{
    find_plugin();
    why_code = FSGD_E_DEVICE;
    /* RTLD_NOW: a missing library or symbol is reported here, by name. The
     * plugin is never unloaded (the CUDA runtime does not expect it). */
    void *h = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(why_not, sizeof why_not, "cuda: cannot load the CUDA plugin: %s", dlerror());
        return;
    }
    const int *abi = symbol(h, "fsgd_cuda_plugin_abi");
    if (abi && *abi != FSGD_CUDA_PLUGIN_ABI) {
        snprintf(why_not, sizeof why_not, "cuda: %s is from another fsgd build (plugin ABI %d, this fsgd needs %d): "
                 "rebuild it with this fsgd", plugin_path, *abi, FSGD_CUDA_PLUGIN_ABI);
        abi = NULL;
    }
    const fsgd_backend_ops_t *ops = abi ? symbol(h, "fsgd_cuda_plugin_ops") : NULL;
    const char *info = ops ? symbol(h, "fsgd_cuda_plugin_build_info") : NULL;
    void *probe = info ? symbol(h, "fsgd_cuda_plugin_probe") : NULL;
    if (!probe) {
        dlclose(h);
        return;
    }
    memcpy(&plugin_probe, &probe, sizeof plugin_probe); /* object to function pointer, as POSIX allows */
    plugin_info = info;
    cuda_ops = ops;
}

const fsgd_backend_ops_t *fsgd_backend_cuda(void)
{
    pthread_once(&load_once, load_plugin);
    return cuda_ops;
}

const char *fsgd_backend_cuda_build(void)
{
    static char buf[sizeof why_not + sizeof plugin_path + 300];
    fsgd_backend_cuda();
    if (plugin_info)
        snprintf(buf, sizeof buf, "%s; plugin %s", plugin_info, plugin_path);
    else
        snprintf(buf, sizeof buf, "toolkit %s; %s", FSGD_CUDA_TOOLKIT, why_not);
    return buf;
}

int fsgd_cuda_probe(const fsgd_csr_t *X, int reps, fsgd_cuda_probe_t *out, char *err, size_t errsz)
{
    fsgd_backend_cuda();
    if (plugin_probe)
        return plugin_probe(X, reps, out, err, errsz);
    memset(out, 0, sizeof *out);
    return fsgd_err_fmt(err, errsz, why_code, "%s", why_not);
}

#else /* built without CUDA: the backend says so, and nothing is loaded */

const fsgd_backend_ops_t *fsgd_backend_cuda(void) { return &unavailable_ops; }

const char *fsgd_backend_cuda_build(void) { return "not built (no complete CUDA toolkit found, or CUDA=0)"; }

int fsgd_cuda_probe(const fsgd_csr_t *X, int reps, fsgd_cuda_probe_t *out, char *err, size_t errsz)
{
    (void)X;
    (void)reps;
    memset(out, 0, sizeof *out);
    return fsgd_err_fmt(err, errsz, why_code, "%s", why_not);
}
#endif
