/* gguf_model_bench: `amn remember` of a whole Q4_K_M-style GGUF model to BF16
 * safetensors, against `cp` of a file of the output's size (not a test).
 *
 * The model is made here, in workdir: `layers` layers of four 4096 x 4096
 * weights (attn_q, attn_k: Q4_K; attn_v, ffn_down: Q6_K in even layers and
 * Q4_K in odd ones, as llama.cpp's Q4_K_M mixes them) and an F32 norm
 * vector, random valid blocks with moderate finite f16 scales, written as
 * GGUF v3 by hand (the plugin's writer does not write block types). With
 * the default 8 layers: 32 weights, 336 MiB in, 1 GiB of BF16 out.
 *
 * Both commands write a fresh file (an existing destination replaced by a
 * rename makes ext4 flush it, timing the disk instead); the copy reads the
 * previous output, already in the page cache, as `amn` reads its mapped
 * input. Runs alternate; prints the best and the median of `runs` for each,
 * the ratio cp / amn (the target is >= 0.5: amn at least half the copy
 * rate), and the CPU seconds each used, which a shared machine disturbs
 * less than the wall time.
 *
 * A third contender, "pipeline", is the same dequantization done in this
 * process with persistent worker threads (gguf_dequantize, the plugin's own
 * kernel entry, into two 1 MiB-per-worker chunks written alternately to a
 * raw file): the floor of amn's streaming loop, without process start,
 * probing, planning or the safetensors writer. Its bytes are checked
 * against the tensor data of amn's output.
 *
 *   gguf_model_bench [--layers N] [--runs N] [--threads N] [--chunk KiB] [--keep] [workdir]
 *
 * amn runs with --no-sync (cp does not fsync either) and --quiet; a fourth
 * contender, interleaved with the others, is the same amn command with
 * --progress (its lines to /dev/null): the same-run ratio of the two is the
 * cost of the progress callbacks (the target is at most 2 %).
 *
 * --threads is passed to amn and sizes the pipeline's pool; --chunk sets the
 * pipeline's chunk per worker (amn's is fixed at 1 MiB).
 */
#include <fcntl.h>
#include <linux/falloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "amn/dtype.h"
#include "gguf_dequant.h"

#ifndef AMN_BINARY_DIR
#define AMN_BINARY_DIR "."
#endif

#define DIM 4096u

enum { TYPE_F32 = 0, TYPE_Q4_K = 12, TYPE_Q6_K = 14 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static uint64_t rng(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* ---- a GGUF v3 file, written by hand ------------------------------------ */

typedef struct tensor {
    char name[64];
    uint32_t type, ndim;
    uint64_t shape[2]; /* ne[0] (the row) first, as GGUF stores it */
    uint64_t nbytes, offset;
} tensor;

static void put(FILE *f, const void *p, size_t n) {
    if (fwrite(p, 1, n, f) != n) {
        perror("gguf_model_bench: write");
        exit(1);
    }
}
static void put_u32(FILE *f, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(f, b, 4);
}
static void put_u64(FILE *f, uint64_t v) {
    put_u32(f, (uint32_t)v);
    put_u32(f, (uint32_t)(v >> 32));
}
static void put_str(FILE *f, const char *s) {
    put_u64(f, strlen(s));
    put(f, s, strlen(s));
}

static void set_f16(uint8_t *p) {
    const uint16_t h = (uint16_t)(0x2000 + rng() % 0x1000); /* about 2^-7 .. 2^-5 */
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* One row of random valid blocks of `type` (DIM elements). */
static void fill_row(uint32_t type, uint8_t *row, size_t bytes) {
    for (size_t i = 0; i < bytes; i += 8) {
        const uint64_t r = rng();
        memcpy(row + i, &r, bytes - i < 8 ? bytes - i : 8);
    }
    if (type == TYPE_Q4_K)
        for (size_t b = 0; b < bytes; b += 144) set_f16(row + b), set_f16(row + b + 2);
    else if (type == TYPE_Q6_K)
        for (size_t b = 0; b < bytes; b += 210) set_f16(row + b + 208);
    else
        for (size_t i = 0; i < bytes; i += 4) {
            const float v = 1.0f + (float)(rng() % 1000) * 1e-4f;
            memcpy(row + i, &v, 4);
        }
}

static uint64_t row_bytes(uint32_t type) {
    return type == TYPE_Q4_K ? DIM / 256 * 144 : type == TYPE_Q6_K ? DIM / 256 * 210 : DIM * 4;
}

/* The model written: its tensors and where their data starts. */
static tensor *model_t;
static unsigned model_nt;
static uint64_t model_data;

/* Returns the BF16 output bytes the model dequantizes to. */
static uint64_t write_model(const char *path, unsigned layers) {
    const unsigned nt = layers * 5;
    tensor *t = calloc(nt, sizeof *t);
    if (!t) exit(1);
    static const char *const names[4] = {"attn_q", "attn_k", "attn_v", "ffn_down"};
    uint64_t off = 0, out = 0;
    unsigned k = 0;
    for (unsigned l = 0; l < layers; l++) {
        for (unsigned w = 0; w < 4; w++, k++) {
            snprintf(t[k].name, sizeof t[k].name, "blk.%u.%s.weight", l, names[w]);
            t[k].type = w >= 2 && l % 2 == 0 ? TYPE_Q6_K : TYPE_Q4_K;
            t[k].ndim = 2;
            t[k].shape[0] = t[k].shape[1] = DIM;
            t[k].nbytes = row_bytes(t[k].type) * DIM;
        }
        snprintf(t[k].name, sizeof t[k].name, "blk.%u.attn_norm.weight", l);
        t[k].type = TYPE_F32;
        t[k].ndim = 1;
        t[k].shape[0] = DIM;
        t[k].nbytes = (uint64_t)DIM * 4;
        k++;
    }
    for (k = 0; k < nt; k++) {
        t[k].offset = off;
        off += (t[k].nbytes + 31) / 32 * 32;
        out += t[k].nbytes / row_bytes(t[k].type) * DIM * (t[k].type == TYPE_F32 ? 4 : 2);
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    put(f, "GGUF", 4);
    put_u32(f, 3);
    put_u64(f, nt);
    put_u64(f, 2); /* key/values */
    put_str(f, "general.architecture");
    put_u32(f, 8); /* string */
    put_str(f, "llama");
    put_str(f, "general.alignment");
    put_u32(f, 4); /* u32 */
    put_u32(f, 32);
    for (k = 0; k < nt; k++) {
        put_str(f, t[k].name);
        put_u32(f, t[k].ndim);
        for (uint32_t d = 0; d < t[k].ndim; d++) put_u64(f, t[k].shape[d]);
        put_u32(f, t[k].type);
        put_u64(f, t[k].offset);
    }
    static const uint8_t zero[32];
    long pos = ftell(f);
    put(f, zero, (size_t)((32 - pos % 32) % 32));
    model_data = (uint64_t)ftell(f);
    uint8_t *row = malloc(DIM * 4);
    if (!row) exit(1);
    for (k = 0; k < nt; k++) {
        const uint64_t rb = row_bytes(t[k].type);
        for (uint64_t r = 0; r < t[k].nbytes / rb; r++) {
            fill_row(t[k].type, row, rb);
            put(f, row, rb);
        }
        put(f, zero, (size_t)((32 - t[k].nbytes % 32) % 32));
    }
    free(row);
    model_t = t;
    model_nt = nt;
    if (fclose(f) != 0) {
        perror(path);
        exit(1);
    }
    return out;
}

/* ---- timing ------------------------------------------------------------- */

typedef struct timing {
    double wall, cpu; /* seconds; cpu: user + system of the command and its children */
} timing;

static timing run(const char *cmd) {
    const double t0 = now();
    const pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        exit(1);
    }
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "gguf_model_bench: failed: %s\n", cmd);
        exit(1);
    }
    const double wall = now() - t0;
    return (timing){wall, (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
                              (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6};
}

static uint64_t file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, unsigned n) {
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double minimum(const double *v, unsigned n) {
    double m = v[0];
    for (unsigned i = 1; i < n; i++)
        if (v[i] < m) m = v[i];
    return m;
}

/* ---- the reference pipeline: persistent workers ------------------------ */

/* Output bytes per worker per round: the core's CHUNK_BYTES unless --chunk. */
static size_t chunk_bytes = 1u << 20;
#define MAX_WORKERS 16

typedef struct job {
    uint32_t type;
    const uint8_t *src; /* first block of the range */
    uint64_t elems;
    uint8_t *dst;
} job;

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    unsigned n, finished;
    uint64_t generation;
    int quit;
    job jobs[MAX_WORKERS];
    pthread_t tid[MAX_WORKERS];
} pool;

typedef struct worker_arg {
    pool *p;
    unsigned k;
} worker_arg;

static void *worker(void *arg) {
    const worker_arg *w = arg;
    pool *p = w->p;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->generation == seen && !p->quit) pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->generation;
        const job j = p->jobs[w->k];
        pthread_mutex_unlock(&p->mu);
        if (j.elems && gguf_dequantize(j.type, j.src, j.elems, AMN_DTYPE_BF16, j.dst) != 0) {
            fprintf(stderr, "gguf_model_bench: dequantize failed\n");
            exit(1);
        }
        pthread_mutex_lock(&p->mu);
        if (++p->finished == p->n) pthread_cond_signal(&p->done);
        pthread_mutex_unlock(&p->mu);
    }
}

static void pool_start(pool *p) {
    pthread_mutex_lock(&p->mu);
    p->finished = 0;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
}

static void pool_wait(pool *p) {
    pthread_mutex_lock(&p->mu);
    while (p->finished < p->n) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

static void write_out(int fd, const void *buf, size_t n) {
    const uint8_t *b = buf;
    while (n) {
        const ssize_t w = write(fd, b, n);
        if (w <= 0) {
            perror("gguf_model_bench: write");
            exit(1);
        }
        b += w;
        n -= (size_t)w;
    }
}

/* Rows [r0, r0 + n) of quantized tensor t, split among the workers, into buf. */
static void assign(pool *p, const uint8_t *map, const tensor *t, uint64_t r0, uint64_t n,
                   uint8_t *buf) {
    const uint64_t rb = row_bytes(t->type);
    for (unsigned k = 0; k < p->n; k++) {
        const uint64_t a = r0 + n * k / p->n, e = r0 + n * (k + 1) / p->n;
        p->jobs[k] = (job){t->type, map + model_data + t->offset + a * rb, (e - a) * DIM,
                           buf + (a - r0) * DIM * 2};
    }
}

static double cpu_self(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Dequantizes the whole model to `out` (raw BF16 tensor data, F32 tensors as
 * they are); returns the wall and CPU seconds it took. */
static timing pipeline(const char *in, const char *out, unsigned workers) {
    const double t0 = now(), c0 = cpu_self();
    const int ifd = open(in, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (ifd < 0 || fstat(ifd, &st) != 0) {
        perror(in);
        exit(1);
    }
    const uint8_t *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, ifd, 0);
    const int ofd = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (map == MAP_FAILED || ofd < 0) {
        perror(out);
        exit(1);
    }
    /* As the core's sink does: blocks allocated up front. */
    uint64_t total = 0;
    for (unsigned i = 0; i < model_nt; i++)
        total += model_t[i].type == TYPE_F32
                     ? model_t[i].nbytes
                     : model_t[i].nbytes / row_bytes(model_t[i].type) * DIM * 2;
    (void)fallocate(ofd, FALLOC_FL_KEEP_SIZE, 0, (off_t)total);
    pool p = {.mu = PTHREAD_MUTEX_INITIALIZER,
              .go = PTHREAD_COND_INITIALIZER,
              .done = PTHREAD_COND_INITIALIZER,
              .n = workers};
    worker_arg args[MAX_WORKERS];
    for (unsigned k = 0; k < workers; k++) {
        args[k] = (worker_arg){&p, k};
        if (pthread_create(&p.tid[k], NULL, worker, &args[k]) != 0) exit(1);
    }
    const size_t per = chunk_bytes * workers;
    uint8_t *bufs[2] = {malloc(per), malloc(per)};
    if (!bufs[0] || !bufs[1]) exit(1);
    const uint64_t rows_per = per / (DIM * 2);
    for (unsigned i = 0; i < model_nt; i++) {
        const tensor *t = &model_t[i];
        if (t->type == TYPE_F32) {
            write_out(ofd, map + model_data + t->offset, (size_t)t->nbytes);
            continue;
        }
        const uint64_t rows = t->nbytes / row_bytes(t->type);
        uint64_t next = rows < rows_per ? rows : rows_per, cur = next;
        assign(&p, map, t, 0, cur, bufs[0]);
        pool_start(&p);
        for (int k = 0;; k = !k) {
            pool_wait(&p);
            uint64_t nn = 0;
            if (next < rows) {
                nn = rows - next < rows_per ? rows - next : rows_per;
                assign(&p, map, t, next, nn, bufs[!k]);
                pool_start(&p);
            }
            write_out(ofd, bufs[k], (size_t)(cur * DIM * 2));
            if (!nn) break;
            next += nn;
            cur = nn;
        }
    }
    pthread_mutex_lock(&p.mu);
    p.quit = 1;
    pthread_cond_broadcast(&p.go);
    pthread_mutex_unlock(&p.mu);
    for (unsigned k = 0; k < workers; k++) pthread_join(p.tid[k], NULL);
    if (close(ofd) != 0) exit(1);
    munmap((void *)map, (size_t)st.st_size);
    close(ifd);
    free(bufs[0]);
    free(bufs[1]);
    return (timing){now() - t0, cpu_self() - c0};
}

/* True when every tensor of the raw file (model order) has the same bytes
 * as the tensor of that name in the safetensors file, found through its
 * header's data_offsets (the writer may order tensors its own way). */
static int same_tensors(const char *raw, const char *st) {
    FILE *a = fopen(raw, "rb"), *b = fopen(st, "rb");
    uint8_t len8[8];
    int same = a && b && fread(len8, 1, 8, b) == 8;
    uint64_t hlen = 0;
    for (int i = 7; same && i >= 0; i--) hlen = hlen << 8 | len8[i];
    char *h = same && hlen < (64u << 20) ? malloc(hlen + 1) : NULL;
    same = h && fread(h, 1, hlen, b) == hlen;
    if (h) h[same ? hlen : 0] = '\0';
    static uint8_t x[1 << 16], y[1 << 16];
    uint64_t at = 0; /* offset in the raw file */
    for (unsigned i = 0; same && i < model_nt; i++) {
        const tensor *t = &model_t[i];
        const uint64_t n =
            t->type == TYPE_F32 ? t->nbytes : t->nbytes / row_bytes(t->type) * DIM * 2;
        char key[80];
        snprintf(key, sizeof key, "\"%s\"", t->name);
        const char *k = strstr(h, key), *o = k ? strstr(k, "\"data_offsets\":[") : NULL;
        unsigned long long beg = 0, end = 0;
        same = o && sscanf(o + 16, "%llu,%llu", &beg, &end) == 2 && end - beg == n &&
               fseek(a, (long)at, SEEK_SET) == 0 && fseek(b, (long)(8 + hlen + beg), SEEK_SET) == 0;
        for (uint64_t done = 0; same && done < n;) {
            const size_t c = n - done < sizeof x ? (size_t)(n - done) : sizeof x;
            same = fread(x, 1, c, a) == c && fread(y, 1, c, b) == c && memcmp(x, y, c) == 0;
            done += c;
        }
        at += n;
    }
    free(h);
    if (a) fclose(a);
    if (b) fclose(b);
    return same;
}

int main(int argc, char **argv) {
    unsigned layers = 8, runs = 5, threads = 0;
    int keep = 0;
    const char *dir = "/tmp";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--layers") == 0 && i + 1 < argc)
            layers = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
            runs = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            threads = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc)
            chunk_bytes = (size_t)atoi(argv[++i]) << 10;
        else if (strcmp(argv[i], "--keep") == 0)
            keep = 1;
        else
            dir = argv[i];
    }
    if (layers == 0 || layers > 1000 || runs == 0 || runs > 100 || threads > MAX_WORKERS ||
        chunk_bytes < DIM * 2 || chunk_bytes > (256u << 20)) {
        fprintf(stderr, "usage: gguf_model_bench [--layers N] [--runs N] [--threads N] "
                        "[--chunk KiB] [--keep] [workdir]\n");
        return 2;
    }
    const char *amn = AMN_BINARY_DIR "/bin/amn";
    char in[1024], out[1024], ref[1024], raw[1024], cmd[4096], thr[32] = "";
    snprintf(in, sizeof in, "%s/amn-model-bench.gguf", dir);
    snprintf(out, sizeof out, "%s/amn-model-bench.safetensors", dir);
    snprintf(ref, sizeof ref, "%s/amn-model-bench.copy", dir);
    snprintf(raw, sizeof raw, "%s/amn-model-bench.raw", dir);
    if (threads) snprintf(thr, sizeof thr, " --threads %u", threads);
    /* The core's default: one worker per CPU, at most 4. */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const unsigned workers = threads ? threads : ncpu < 1 ? 1 : ncpu > 4 ? 4 : (unsigned)ncpu;

    const double tg = now();
    const uint64_t payload = write_model(in, layers);
    printf("model: %u weights 4096x4096 (Q4_K + Q6_K) + %u F32 norms, %.1f MiB, made in %.1f s\n",
           4 * layers, layers, (double)file_size(in) / (1 << 20), now() - tg);

    /* Alternate the contenders so that all see the same state of the machine.
     * Each starts on a quiet page cache: the previous output is unlinked and
     * the dirty pages of earlier runs written back before the clock starts,
     * so neither freeing 1 GiB nor its write-back is timed. */
    double aw[100], ac[100], cw[100], cc[100], pw[100], pc[100], gw[100], gc[100];
    for (unsigned r = 0; r < runs; r++) {
        /* with and without progress, in alternating order */
        timing a = {0, 0}, g = {0, 0};
        for (int k = 0; k < 2; k++) {
            const bool with_progress = (k == 0) == (r % 2 == 1);
            snprintf(cmd, sizeof cmd, "%s remember %s --to bf16 -o %s%s --no-sync %s", amn, in, out,
                     thr, with_progress ? "--progress 2>/dev/null >/dev/null" : "--quiet");
            unlink(out);
            sync();
            if (with_progress)
                g = run(cmd);
            else
                a = run(cmd);
        }
        gw[r] = g.wall, gc[r] = g.cpu;
        snprintf(cmd, sizeof cmd, "cp %s %s", out, ref);
        unlink(ref);
        sync();
        const timing c = run(cmd);
        unlink(raw);
        sync();
        const timing pt = pipeline(in, raw, workers);
        pw[r] = pt.wall, pc[r] = pt.cpu;
        aw[r] = a.wall, ac[r] = a.cpu, cw[r] = c.wall, cc[r] = c.cpu;
    }
    const int ok = same_tensors(raw, out);
    const uint64_t out_bytes = file_size(out);
    const double gb = (double)out_bytes / 1e9;
    const double a_min = minimum(aw, runs), c_min = minimum(cw, runs), p_min = minimum(pw, runs);
    const double a_med = median(aw, runs), c_med = median(cw, runs), p_med = median(pw, runs);
    printf("output: %.1f MiB of safetensors (%.1f MiB of tensor data), %u runs, %u workers, "
           "pipeline chunk %zu KiB per worker\n",
           (double)out_bytes / (1 << 20), (double)payload / (1 << 20), runs, workers,
           chunk_bytes >> 10);
    printf("%-34s %8s %8s %9s %8s\n", "", "best s", "median s", "GB/s best", "CPU s");
    printf("%-34s %8.3f %8.3f %9.2f %8.3f\n", "amn remember --to bf16", a_min, a_med, gb / a_min,
           median(ac, runs));
    const double g_min = minimum(gw, runs), g_med = median(gw, runs);
    printf("%-34s %8.3f %8.3f %9.2f %8.3f\n", "amn remember --progress", g_min, g_med, gb / g_min,
           median(gc, runs));
    printf("%-34s %8.3f %8.3f %9.2f %8.3f\n", "cp of the output", c_min, c_med, gb / c_min,
           median(cc, runs));
    printf("%-34s %8.3f %8.3f %9.2f %8.3f\n", "pipeline, persistent workers", p_min, p_med,
           gb / p_min, median(pc, runs));
    printf("ratio cp / amn: best %.2f, median %.2f (target >= 0.50); CPU seconds cp / amn %.2f\n",
           c_min / a_min, c_med / a_med, median(cc, runs) / median(ac, runs));
    printf("progress cost (--progress / --quiet, same run): best %+.1f %%, median %+.1f %% "
           "(target <= 2 %%)\n",
           100.0 * (g_min / a_min - 1), 100.0 * (g_med / a_med - 1));
    printf("ratio cp / pipeline: best %.2f, median %.2f; pipeline bytes %s amn's tensor data\n",
           c_min / p_min, c_med / p_med, ok ? "equal" : "DIFFER FROM");
    unlink(ref);
    unlink(raw);
    if (!keep) unlink(in), unlink(out);
    free(model_t);
    return ok ? 0 : 1;
}
