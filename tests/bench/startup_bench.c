/* Benchmark of start-up (not a test): where the wall time of `amn inspect`
 * of a 2 GiB safetensors file goes, and `amn inspect` of 1000 small files in
 * one invocation against 1000 invocations.
 *
 * Part 1 runs these commands interleaved, round after round, and prints the
 * median and best wall time and the median CPU time (user + system, from
 * wait4; what a loaded machine shares out) of each:
 *   /bin/true                         process start alone (exec, ld.so, libc)
 *   amn --version                     + libamn, json-c, libltdl; no plugin
 *   amn plugins, no plugin directory  + the registry with nothing to load
 *   amn inspect 2 GiB, safetensors only  (a directory holding only that module)
 *   amn inspect 2 GiB, no cache       every plugin loaded (AMN_REGISTRY_CACHE=0)
 *   amn inspect 2 GiB, cache warm     the registry cache read, only the module
 *                                     that claims the file loaded (as shipped)
 *   amn inspect 16 MiB                the same two with a small file
 * The differences between neighbouring lines are the cost of each step.
 * Given another build's amn (e.g. one of an earlier commit), its --version
 * and warm-cache inspect run in the same rounds, for a before/after pair
 * measured under the same load.
 * Part 2 times `amn inspect F1 ... F1000` (median of 3) against one loop of
 * 1000 `amn inspect Fi` (both to /dev/null), and their ratio (target >= 5).
 *
 *   build/bin/startup_bench [workdir] [rounds] [other-amn]
 *   (default /dev/shm or /tmp, 101 rounds, no other build)
 * The 2 GiB file is sparse (inspect never reads its data). The load average
 * is printed before and after: on a shared machine only same-run ratios mean
 * anything. */
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef AMN_BINARY_DIR
#define AMN_BINARY_DIR "."
#endif

extern char **environ;

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Run argv with env_extra added to the environment, stdout to /dev/null;
 * wall seconds in *wall, user + system seconds in *cpu. */
static void run(char *const argv[], char *const env_extra[], double *wall, double *cpu) {
    char *envp[512];
    size_t n = 0;
    for (size_t i = 0; env_extra && env_extra[i] && n < 500; i++) envp[n++] = env_extra[i];
    for (char **e = environ; *e && n < 510; e++) {
        int shadowed = 0; /* an env_extra entry replaces the inherited one */
        for (size_t i = 0; env_extra && env_extra[i]; i++) {
            const char *eq = strchr(env_extra[i], '=');
            size_t k = (size_t)(eq - env_extra[i]) + 1;
            if (strncmp(*e, env_extra[i], k) == 0) shadowed = 1;
        }
        if (!shadowed) envp[n++] = *e;
    }
    envp[n] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    double t0 = now();
    pid_t pid;
    if (posix_spawn(&pid, argv[0], &fa, NULL, argv, envp) != 0) {
        perror(argv[0]);
        exit(1);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "failed: %s %s\n", argv[0], argv[1] ? argv[1] : "");
        exit(1);
    }
    *wall = now() - t0;
    *cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
    posix_spawn_file_actions_destroy(&fa);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A safetensors file of one F32 rows x cols tensor, its data a hole. */
static void write_sparse(const char *path, uint64_t rows, uint64_t cols) {
    char header[256];
    const uint64_t bytes = rows * cols * 4;
    int n = snprintf(header, sizeof header,
                     "{\"w\":{\"dtype\":\"F32\",\"shape\":[%llu,%llu],\"data_offsets\":[0,%llu]}}",
                     (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)bytes);
    while (n % 8) header[n++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    const uint64_t len = (uint64_t)n;
    fwrite(&len, 8, 1, f);
    fwrite(header, 1, (size_t)n, f);
    fflush(f);
    if (ftruncate(fileno(f), (off_t)(8 + len + bytes)) != 0) exit(1);
    fclose(f);
}

static void loadavg(const char *when) {
    double l[3];
    if (getloadavg(l, 3) == 3) printf("load average %s: %.2f %.2f %.2f\n", when, l[0], l[1], l[2]);
}

enum { N_FILES = 1000 };

int main(int argc, char **argv) {
    const char *dir = argc > 1 ? argv[1] : access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    const int rounds = argc > 2 ? atoi(argv[2]) : 101;
    if (rounds < 1) return 2;
    char amn[] = AMN_BINARY_DIR "/bin/amn";
    char *other = argc > 3 ? argv[3] : NULL;
    if (other && access(other, X_OK) != 0) {
        perror(other);
        return 1;
    }
    const char *st_module = AMN_BINARY_DIR "/lib/amn/plugins/amn-safetensors.so";
    char work[512], big[600], small[600], only[600], link[700];
    snprintf(work, sizeof work, "%s/amn-startup-bench.%d", dir, (int)getpid());
    if (mkdir(work, 0700) != 0) {
        perror(work);
        return 1;
    }
    snprintf(big, sizeof big, "%s/big-2g.safetensors", work);
    snprintf(small, sizeof small, "%s/small-16m.safetensors", work);
    snprintf(only, sizeof only, "%s/only-safetensors", work);
    write_sparse(big, 16384, 32768);
    write_sparse(small, 2048, 2048);
    /* A plugin directory with the safetensors module alone (a static build
     * has no module: that line is left out). */
    const int have_module = access(st_module, R_OK) == 0;
    snprintf(link, sizeof link, "%s/amn-safetensors.so", only);
    if (have_module && (mkdir(only, 0700) != 0 || symlink(st_module, link) != 0)) {
        perror(only);
        return 1;
    }
    char env_only_path[700];
    snprintf(env_only_path, sizeof env_only_path, "AMN_PLUGIN_PATH=%s", only);
    char *env_none[] = {"AMN_PLUGIN_SYSTEM_PATH=", NULL};
    char *env_only[] = {"AMN_PLUGIN_SYSTEM_PATH=", env_only_path, "AMN_REGISTRY_CACHE=0", NULL};
    char *env_nocache[] = {"AMN_REGISTRY_CACHE=0", NULL};
    /* A registry cache of its own, made warm by one run before timing. */
    char env_cache_dir[700];
    snprintf(env_cache_dir, sizeof env_cache_dir, "AMN_REGISTRY_CACHE_DIR=%s/cache", work);
    char *env_warm[] = {env_cache_dir, NULL};
    {
        char *av[] = {amn, "inspect", big, NULL}, *ov[] = {other, "inspect", big, NULL};
        double w_, c_;
        run(av, env_warm, &w_, &c_);
        if (other) run(ov, env_warm, &w_, &c_);
    }

    struct {
        const char *what;
        char *argv[4];
        char **env;
        int skip;
    } cmd[] = {
        {"/bin/true (process start)", {"/bin/true", NULL}, NULL, 0},
        {"amn --version (+ libamn, json-c, ltdl)", {amn, "--version", NULL}, NULL, 0},
        {"amn plugins, no plugin found", {amn, "plugins", NULL}, env_none, 0},
        {"amn inspect 2 GiB, safetensors only",
         {amn, "inspect", big, NULL},
         env_only,
         !have_module},
        {"amn inspect 2 GiB, no cache (all plugins)", {amn, "inspect", big, NULL}, env_nocache, 0},
        {"amn inspect 2 GiB, cache warm", {amn, "inspect", big, NULL}, env_warm, 0},
        {"amn inspect 16 MiB, no cache (all plugins)",
         {amn, "inspect", small, NULL},
         env_nocache,
         0},
        {"amn inspect 16 MiB, cache warm", {amn, "inspect", small, NULL}, env_warm, 0},
        {"other build: amn --version", {other, "--version", NULL}, NULL, !other},
        {"other build: amn inspect 2 GiB, cache warm",
         {other, "inspect", big, NULL},
         env_warm,
         !other},
    };
    enum { NC = sizeof cmd / sizeof *cmd };
    double *wall = calloc((size_t)rounds * NC, sizeof *wall);
    double *cpu = calloc((size_t)rounds * NC, sizeof *cpu);
    if (!wall || !cpu) return 1;
    loadavg("before");
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < NC; c++)
            if (!cmd[c].skip)
                run(cmd[c].argv, cmd[c].env, &wall[c * rounds + r], &cpu[c * rounds + r]);
    printf("part 1: %d interleaved rounds (ms)          wall median   best   CPU median\n", rounds);
    for (int c = 0; c < NC; c++) {
        if (cmd[c].skip) continue;
        qsort(wall + c * rounds, (size_t)rounds, sizeof *wall, cmp_double);
        qsort(cpu + c * rounds, (size_t)rounds, sizeof *cpu, cmp_double);
        printf("  %-42s %8.2f %7.2f %8.2f\n", cmd[c].what, wall[c * rounds + rounds / 2] * 1e3,
               wall[c * rounds] * 1e3, cpu[c * rounds + rounds / 2] * 1e3);
    }

    /* Part 2: N_FILES small files (copies of one 16-tensor header). */
    char **files = calloc(N_FILES, sizeof *files);
    char **many = calloc(N_FILES + 3, sizeof *many);
    if (!files || !many) return 1;
    many[0] = amn, many[1] = "inspect";
    for (int i = 0; i < N_FILES; i++) {
        char p[700];
        snprintf(p, sizeof p, "%s/s%04d.safetensors", work, i);
        write_sparse(p, 16, 16 + (uint64_t)i % 7);
        files[i] = strdup(p);
        many[2 + i] = files[i];
    }
    /* The loop (a minute under load) runs once, between the first and the
     * second of three single invocations. */
    double one[3], loop, w, c_;
    run(many, env_warm, &one[0], &c_);
    const double t0 = now();
    for (int i = 0; i < N_FILES; i++) {
        char *av[] = {amn, "inspect", files[i], NULL};
        run(av, env_warm, &w, &c_);
    }
    loop = now() - t0;
    run(many, env_warm, &one[1], &c_);
    run(many, env_warm, &one[2], &c_);
    qsort(one, 3, sizeof *one, cmp_double);
    printf("part 2: inspect of %d small files: one invocation %.1f ms (median of 3; best %.1f), "
           "%d invocations %.0f ms: %.0fx faster (target >= 5)\n",
           N_FILES, one[1] * 1e3, one[0] * 1e3, N_FILES, loop * 1e3, loop / one[1]);
    loadavg("after");
    for (int i = 0; i < N_FILES; i++) unlink(files[i]), free(files[i]);
    free(files), free(many), free(wall), free(cpu);
    char cache_dir[600];
    snprintf(cache_dir, sizeof cache_dir, "rm -rf '%s/cache'", work);
    if (system(cache_dir) != 0) fprintf(stderr, "could not remove %s/cache\n", work);
    unlink(link), rmdir(only), unlink(big), unlink(small), rmdir(work);
    return 0;
}
