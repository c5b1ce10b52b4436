/* Interrupted runs leave nothing behind: on SIGINT, SIGTERM, SIGHUP and
 * SIGPIPE the CLI removes the named temporary outputs the library has
 * pending (O_TMPFILE outputs need nothing: the kernel frees them), ends a
 * progress line, and dies by the same signal, so the shell sees the usual
 * 128 + signal status. Everything here is async-signal-safe. */
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
}
