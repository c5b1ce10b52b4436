/* --max-alloc, --max-total, --max-items, --max-ratio, --max-header and
 * --max-depth: the library's amn_limits from the command line. A value the
 * user gives explicitly may tighten the built-in cap (amn_limits_default) or
 * raise it, up to a ceiling that keeps the library's own size arithmetic far
 * from overflow; --max-ratio 0 turns the ratio cap off. --max-depth only
 * tightens: the parsers that recurse do so on the C stack, which a larger
 * depth would not make bigger. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* "123", "64K", "64M", "2G", "1T", "1P" (powers of 1024; "MiB", "MB" and "m"
 * read the same). False on anything else or overflow. */
bool cli_parse_size(const char *s, uint64_t *out) {
    if (!s || *s < '0' || *s > '9') return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno) return false;
    unsigned shift = 0;
    switch (*end) {
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    case 't':
    case 'T':
        shift = 40;
        end++;
        break;
    case 'p':
    case 'P':
        shift = 50;
        end++;
        break;
    default:
        break;
    }
    if (shift && (strcmp(end, "iB") == 0 || strcmp(end, "B") == 0))
        end += strlen(end);
    else if (!shift && strcmp(end, "B") == 0)
        end++;
    if (*end) return false;
    if (shift && v > (UINT64_MAX >> shift)) return false;
    *out = (uint64_t)v << shift;
    return true;
}

static const struct {
    const char *option;
    bool size;        /* a byte size (64M); else a count */
    bool zero_is_off; /* 0 turns the cap off */
    uint64_t ceiling; /* highest value accepted; 0: the built-in cap */
} axes[] = {
    {"--max-alloc", true, false, 1ull << 50},  {"--max-total", true, false, 1ull << 50},
    {"--max-items", false, false, 1ull << 40}, {"--max-ratio", false, true, UINT32_MAX},
    {"--max-header", true, false, 1ull << 50}, {"--max-depth", false, false, 0},
};

/* The amn_limits field an axis sets, and its built-in value. */
static uint64_t builtin(size_t axis) {
    amn_limits d;
    amn_limits_default(&d);
    const uint64_t v[] = {d.max_alloc_one, d.max_alloc,        d.max_tensors,
                          d.max_ratio,     d.max_header_bytes, d.max_depth};
    return v[axis];
}

static void apply(amn_limits *l, size_t axis, uint64_t v) {
    switch (axis) {
    case 0:
        l->max_alloc_one = v;
        break;
    case 1:
        l->max_alloc = v;
        break;
    case 2: /* tensors, archive members, GGUF key/values, elements of one array */
        l->max_tensors = v;
        if (l->max_array > v) l->max_array = v;
        break;
    case 3:
        l->max_ratio = (uint32_t)v;
        break;
    case 4:
        l->max_header_bytes = v;
        break;
    default:
        l->max_depth = (uint32_t)v;
        break;
    }
}

int cli_limit_option(cli_args *a, const char *opt, const char *value) {
    size_t axis = 0;
    while (axis < sizeof axes / sizeof *axes && strcmp(opt, axes[axis].option) != 0) axis++;
    if (axis == sizeof axes / sizeof *axes) return 0;
    char msg[256];
    if (!value) {
        snprintf(msg, sizeof msg, "%s needs a value", opt);
        return -cli_usage_fail(a->command, msg);
    }
    if (!a->limits_set) {
        amn_limits_default(&a->limits);
        a->limits_set = true;
    }
    uint64_t v;
    if (!cli_parse_size(value, &v) || (v == 0 && !axes[axis].zero_is_off)) {
        snprintf(msg, sizeof msg, "%s %s: want a positive %s", opt, value,
                 axes[axis].size ? "size such as 64M or 2G" : "number");
        return -cli_usage_fail(a->command, msg);
    }
    const uint64_t cap = axes[axis].ceiling ? axes[axis].ceiling : builtin(axis);
    if (v > cap) {
        char b[32];
        static const char units[] = "KMGTP";
        int u = -1;
        while (axes[axis].size && u < 4 && cap % (1ull << (10 * (u + 2))) == 0) u++;
        if (u >= 0)
            snprintf(b, sizeof b, "%" PRIu64 "%c", cap >> (10 * (u + 1)), units[u]);
        else
            snprintf(b, sizeof b, "%" PRIu64, cap);
        snprintf(msg, sizeof msg, "%s %s: above the %s of %s", opt, value,
                 axes[axis].ceiling ? "highest accepted value"
                                    : "built-in cap (limits only tighten)",
                 b);
        return -cli_usage_fail(a->command, msg);
    }
    apply(&a->limits, axis, v);
    return 1;
}

const amn_limits *cli_limits(const cli_args *a) {
    return a->limits_set ? &a->limits : NULL;
}
