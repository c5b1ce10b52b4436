/* Progress of a conversion on stderr: a line redrawn in place on a terminal
 * (at most 10 times a second), plain lines with --progress (at most one a
 * second, for logs), nothing otherwise or with --quiet. The library calls
 * cli_progress_update after every output chunk; the clock check keeps the
 * cost at one clock_gettime per chunk. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"

/* A drawn, unfinished terminal line: a signal handler ends it. */
static volatile sig_atomic_t line_open;

void cli_progress_on_signal(void) {
    if (line_open) (void)!write(STDERR_FILENO, "\n", 1);
    line_open = 0;
}

void cli_progress_begin(cli_progress *p, const cli_args *a) {
    memset(p, 0, sizeof *p);
    if (a->quiet)
        p->mode = CLI_PROGRESS_OFF;
    else if (a->progress)
        p->mode = CLI_PROGRESS_LINES;
    else
        p->mode = isatty(STDERR_FILENO) ? CLI_PROGRESS_TTY : CLI_PROGRESS_OFF;
    p->interval = p->mode == CLI_PROGRESS_TTY ? 0.1 : 1.0;
    p->start = cli_now();
    p->last = -1e9;
}

static void fmt_eta(double s, char *buf, size_t size) {
    if (s < 0 || s > 99 * 3600.0) {
        snprintf(buf, size, "--:--");
        return;
    }
    unsigned t = (unsigned)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, size, "%u:%02u:%02u", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, size, "%u:%02u", t / 60, t % 60);
}

/* The tensor name as it may be shown: control bytes (a hostile file could
 * hold escape sequences) become '?', and at most `cols` columns (UTF-8
 * continuation bytes take none). */
static void safe_name(const char *name, size_t cols, char *buf, size_t size) {
    size_t used = 0, width = 0;
    for (const unsigned char *c = (const unsigned char *)name; *c && used + 1 < size; c++) {
        const bool cont = (*c & 0xC0) == 0x80;
        if (!cont && width >= cols) break;
        buf[used++] = *c < 0x20 || *c == 0x7f ? '?' : (char)*c;
        width += !cont;
    }
    while (used && ((unsigned char)buf[used - 1] & 0xC0) == 0xC0) used--; /* cut lead byte */
    buf[used] = '\0';
}

static size_t term_cols(void) {
    struct winsize ws;
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col >= 20) return ws.ws_col;
    return 80;
}

static void draw(cli_progress *p, const amn_progress *info, double t) {
    char done[32], total[32], rate[32], eta[16], line[512], name[256];
    const double elapsed = t - p->start;
    const double bps = elapsed > 0 ? (double)info->bytes_done / elapsed : 0;
    const unsigned pct =
        info->bytes_total ? (unsigned)(100.0 * (double)info->bytes_done / (double)info->bytes_total)
                          : 100;
    cli_size(info->bytes_done, done, sizeof done);
    cli_size(info->bytes_total, total, sizeof total);
    /* The first instants (header written, nothing timed yet) give no rate. */
    const bool timed = elapsed >= 0.25 && info->bytes_done > 0;
    if (timed)
        cli_size((uint64_t)bps, rate, sizeof rate);
    else
        snprintf(rate, sizeof rate, "- B");
    const uint64_t left =
        info->bytes_total > info->bytes_done ? info->bytes_total - info->bytes_done : 0;
    fmt_eta(timed ? (double)left / bps : -1, eta, sizeof eta);
    int n = snprintf(line, sizeof line, "%3u%% %s / %s  %s/s  ETA %s", pct > 100 ? 100 : pct, done,
                     total, rate, eta);
    if (n < 0) return;
    if (p->mode == CLI_PROGRESS_TTY) {
        const size_t cols = term_cols() - 1, used = (size_t)n + 2; /* never wrap: \r must work */
        safe_name(info->tensor_name ? info->tensor_name : "", used < cols ? cols - used : 0, name,
                  sizeof name);
        fprintf(stderr, "\r\033[K%.*s%s%s", (int)(cols < (size_t)n ? cols : (size_t)n), line,
                *name ? "  " : "", name);
        line_open = 1;
    } else {
        safe_name(info->tensor_name ? info->tensor_name : "", 200, name, sizeof name);
        fprintf(stderr, "amn: progress %s%s%s\n", line, *name ? "  " : "", name);
    }
    fflush(stderr);
}

void cli_progress_update(void *user, const amn_progress *info) {
    cli_progress *p = user;
    if (p->mode == CLI_PROGRESS_OFF) return;
    const bool last = info->tensor_name == NULL && info->tensor_index == info->tensor_count;
    const double t = cli_now();
    if (last ? p->mode == CLI_PROGRESS_TTY : t - p->last < p->interval) return;
    p->last = t;
    draw(p, info, t);
}

void cli_progress_end(cli_progress *p) {
    if (p->mode == CLI_PROGRESS_TTY && line_open) {
        fputs("\r\033[K", stderr); /* the summary follows on stdout */
        fflush(stderr);
        line_open = 0;
    }
}
