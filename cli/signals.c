/* Interrupted runs leave nothing behind: on SIGINT, SIGTERM, SIGHUP and
 * SIGPIPE the CLI removes the named temporary outputs the library has
 * pending (O_TMPFILE outputs need nothing: the kernel frees them), ends a
 * progress line, and dies by the same signal, so the shell sees the usual
 * 128 + signal status.
 *
 * SIGBUS is what the kernel sends when a mapped input is read past its end
 * because the file was truncated (or its storage failed) after it was
 * mapped: the library's pread paths report that as an I/O error, but reads
 * through the mapping (blocks of scales, small tensors, AMN_INPUT=map)
 * cannot (the library checks the file's size before each chunk it reads
 * through a mapping, but a truncation between that check and the read still
 * raises the signal). The CLI turns it into the same outcome: the temporary
 * outputs removed, a message naming the input, and the I/O exit status,
 * never a crash. Everything the handlers do is async-signal-safe. */
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "folder.h"
#include "gguf_split.h"

static const int handled[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

static void on_signal(int sig) {
    amn_sink_unlink_pending();
    cli_folder_on_signal();
    cli_gguf_split_on_signal();
    cli_side_on_signal();
    cli_progress_on_signal();
    /* SA_RESETHAND restored the default action and SA_NODEFER left the
     * signal unblocked: raising it again ends the process by it. */
    raise(sig);
    _exit(128 + sig); /* not reached unless the default action is to continue */
}

/* The input being converted, for the SIGBUS message: written before the
 * conversion starts, only read by the handler. */
static char input_path[4096];

void cli_signals_input(const char *path) {
    size_t n = path ? strlen(path) : 0;
    if (n >= sizeof input_path) n = sizeof input_path - 1;
    memcpy(input_path, path ? path : "", n);
    input_path[n] = '\0';
}

static void put_err(const char *s) {
    ssize_t w = write(STDERR_FILENO, s, strlen(s));
    (void)w;
}

/* Set by the first thread in on_bus. Two workers reading the same truncated
 * mapping fault at once, each in the handler: one reports and exits, the
 * other waits for that exit (their messages interleaved, and the cleanup ran
 * twice at once, before). A lock-free atomic_flag is async-signal-safe. */
static atomic_flag bus_reported = ATOMIC_FLAG_INIT;

static void on_bus(int sig) {
    (void)sig;
    if (atomic_flag_test_and_set(&bus_reported))
        for (;;) pause();
    amn_sink_unlink_pending();
    cli_folder_on_signal();
    cli_gguf_split_on_signal();
    cli_side_on_signal();
    cli_progress_on_signal();
    put_err("amn: i/o error: ");
    put_err(input_path[0] ? input_path : "an input file");
    put_err(": truncated or unreadable while mapped (SIGBUS); no output was written\n");
    _exit(cli_exit_code(AMN_E_IO)); /* a switch on a constant: async-signal-safe */
}

/* ---- test hook ------------------------------------------------------------
 * AMN_TEST_TRUNCATE_AFTER=N (tests only): once the output holds N bytes (at
 * a progress report, between two chunks: deterministic), the input is
 * truncated to AMN_TEST_TRUNCATE_TO bytes (default 0), as another process
 * truncating or rewriting it in place would. With AMN_TEST_TRUNCATE_SIGBUS=1
 * the hook then raises SIGBUS, the signal a read racing with the truncation
 * gets through the mapping. */
bool cli_truncate_hook_init(cli_truncate_hook *h, const char *path, amn_progress_fn fn,
                            void *user) {
    const char *after = getenv("AMN_TEST_TRUNCATE_AFTER");
    if (!after || !*after || !path) return false;
    const char *to = getenv("AMN_TEST_TRUNCATE_TO"), *bus = getenv("AMN_TEST_TRUNCATE_SIGBUS");
    *h = (cli_truncate_hook){.path = path,
                             .after = strtoull(after, NULL, 10),
                             .to = to ? strtoull(to, NULL, 10) : 0,
                             .raise_bus = bus && strcmp(bus, "1") == 0,
                             .fn = fn,
                             .user = user};
    return true;
}

void cli_truncate_hook_progress(void *user, const amn_progress *info) {
    cli_truncate_hook *h = user;
    if (h->fn) h->fn(h->user, info);
    if (h->done || info->bytes_done < h->after) return;
    h->done = true;
    if (truncate(h->path, (off_t)h->to) != 0) return;
    if (h->raise_bus) raise(SIGBUS);
}

void cli_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof handled / sizeof *handled; i++) {
        struct sigaction old;
        /* A signal ignored by whoever started us (nohup, a shell's `trap ''`)
         * stays ignored, as POSIX asks of programs that catch signals. */
        if (sigaction(handled[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        sigaction(handled[i], &sa, NULL);
    }
    sa.sa_handler = on_bus;
    sa.sa_flags = 0;
    sigaction(SIGBUS, &sa, NULL);
}
