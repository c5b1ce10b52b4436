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
 * cannot. The CLI turns it into the same outcome: the temporary outputs
 * removed, a message, and the I/O exit status, never a crash. Everything
 * here is async-signal-safe. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "folder.h"

static const int handled[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};

static void on_signal(int sig) {
    amn_sink_unlink_pending();
    cli_folder_on_signal();
    cli_progress_on_signal();
    /* SA_RESETHAND restored the default action and SA_NODEFER left the
     * signal unblocked: raising it again ends the process by it. */
    raise(sig);
    _exit(128 + sig); /* not reached unless the default action is to continue */
}

static void on_bus(int sig) {
    (void)sig;
    amn_sink_unlink_pending();
    cli_folder_on_signal();
    cli_progress_on_signal();
    static const char msg[] =
        "amn: i/o error: an input file was truncated or could not be read while mapped "
        "(SIGBUS); no output was written\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(cli_exit_code(AMN_E_IO)); /* a switch on a constant: async-signal-safe */
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
