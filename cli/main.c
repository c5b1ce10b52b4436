/* amn — read every tensor file format; recover full precision. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage_main[] =
    "usage: amn [--plugin-dir DIR]... COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  parse FILE [--json]                 list every tensor (name dtype [shape] size)\n"
    "  inspect FILE... [--json] [--to DTYPE]\n"
    "                                      header-only summary (alias: info)\n"
    "  remember FILE [--to bf16|f16|f32] [-o OUT] [--force] [--threads N]\n"
    "                                      dequantize to safetensors (alias: dequantize)\n"
    "  convert FILE --to TARGET [--out-dtype bf16|f16|f32|keep] [-o OUT] [--force]\n"
    "          [--threads N] [--opt KEY=VALUE]... [--gguf-kv KEY=VALUE]...\n"
    "          [--gguf-metadata FILE.json]\n"
    "                                      any readable input to any writable target\n"
    "  plugins [--json]                    loaded plugins, formats, schemes, matrix\n"
    "  scan FILE... [--json]               audit without loading: globals, code paths, anomalies\n"
    "  forget FILE --to TARGET [--block-size N] [--keep GLOB]... [-o OUT] [--force]\n"
    "         [--pure] [--output-tensor-type T] [--token-embedding-type T]\n"
    "         [--leave-output-tensor] [--tensor-type PATTERN=T]... [--allow-requantize]\n"
    "         [--imatrix FILE] [--opt KEY=VALUE]...\n"
    "         [--threads N] [--json]      quantize (bnb-nf4|bnb-nf4-dq|bnb-fp4|bnb-fp4-dq|\n"
    "                                      bnb-int8, or a GGUF file type such as Q4_K_M)\n"
    "                                      (alias: quantize)\n"
    "\n"
    "every command takes --json (one JSON document on stdout; errors as a JSON\n"
    "object on stderr). Commands that read a file take --from FORMAT to skip\n"
    "probing, and the limits below. remember and convert show progress on a\n"
    "terminal; --quiet silences it and the summary, --progress prints plain\n"
    "progress lines (for logs); --no-sync skips the fsyncs of the output.\n"
    "A model folder in (or -o DIR/) makes remember, convert and forget write a\n"
    "model folder: shards of at most --shard-size SIZE (default 5GB), index,\n"
    "config.json edited, other files copied.\n"
    "\n" CLI_LIMITS_HELP "\n"
    "amn COMMAND --help shows one command; amn --version the version; man amn.\n";

/* Indices into commands[], in its order. */
enum { CMD_PARSE, CMD_INSPECT, CMD_REMEMBER, CMD_CONVERT, CMD_PLUGINS, CMD_FORGET, CMD_SCAN };

static const struct {
    const char *name, *alias, *help;
} commands[] = {
    {"parse", NULL,
     "usage: amn parse FILE [--json] [--from FORMAT] [--max-... LIMIT]\n"
     "Open FILE and list its tensors (name, dtype, shape, size), their roles in a\n"
     "quantized model, and any non-tensor values a checkpoint holds.\n"},
    {"inspect", "info",
     "usage: amn inspect FILE... [--json] [--to bf16|f16|f32] [--from FORMAT] [--max-... LIMIT]\n"
     "Read only the header of each FILE: format, tensor count, sizes, dtypes, the\n"
     "quantization scheme and what remember would produce (sizes at --to). With\n"
     "several files each report starts with File:, a file that fails is reported\n"
     "and the others still run; the exit code is that of the first failure.\n"},
    {"remember", "dequantize",
     "usage: amn remember FILE [--to bf16|f16|f32] [-o OUT] [--force] [--threads N]\n"
     "                    [--json] [--quiet | --progress] [--no-sync] [--shard-size SIZE]\n"
     "                    [--only-shards K[-L]] [--write-index] [--resume] [--dedup-tied]\n"
     "                    [--max-... LIMIT]\n"
     "Write FILE as safetensors with every quantized weight dequantized to --to\n"
     "(default bf16); other tensors are copied unchanged. Without -o the output is\n"
     "<stem>-<dtype>.safetensors next to FILE. An existing output is kept unless\n"
     "--force; the input is never overwritten.\n"
     "A model folder (or its index) as FILE, or -o DIR/, writes a model folder:\n"
     "shards of at most --shard-size SIZE (default 5GB, 0 = one file) with their\n"
     "index, config.json without quantization_config, the other files copied.\n"
     "Across machines: --only-shards K[-L] writes just those shards into the\n"
     "folder, --write-index the index, config.json and the other files.\n"
     "--resume continues an interrupted folder conversion (its verified shards\n"
     "kept); --dedup-tied leaves out lm_head.weight when it equals the input\n"
     "embeddings and config.json has \"tie_word_embeddings\": true.\n"
     "FILE may be a model folder packed as .tar, .tar.gz, .tar.zst, .tar.xz or .zip:\n"
     "read without unpacking (compressed model files pass through temporary files\n"
     "in $TMPDIR); -o DIR/ then copies the packed folder's other files.\n"},
    {"convert", NULL,
     "usage: amn convert FILE --to TARGET [--out-dtype bf16|f16|f32|keep] [-o OUT] [--force]\n"
     "                   [--threads N] [--opt KEY=VALUE]... [--gguf-kv KEY=VALUE]...\n"
     "                   [--gguf-metadata FILE] [--shard-size SIZE] [--only-shards K[-L]]\n"
     "                   [--write-index] [--resume] [--dedup-tied]\n"
     "                   [--split-max-tensors N | --split-max-size N(M|G)]\n"
     "Convert FILE to TARGET (a format name such as safetensors or gguf; bf16 means\n"
     "safetensors). Quantized weights are dequantized and every floating tensor is\n"
     "cast to --out-dtype (default bf16); integer and bool tensors are copied.\n"
     "--opt KEY=VALUE passes an option to TARGET's writer (repeatable; `amn plugins`\n"
     "lists each writer's options; any other key is an error). --gguf-kv KEY=VALUE\n"
     "is --opt kv=KEY=VALUE and --gguf-metadata FILE is --opt metadata=FILE.\n"
     "--out-dtype keep keeps every tensor's dtype (quantized weights become bf16);\n"
     "conversions from or to npz and pth keep dtypes unless --out-dtype is given.\n"
     "A model folder as FILE, or -o DIR/, writes a model folder (see remember);\n"
     "FILE may be a packed model folder (.tar, .tar.gz, .zip, ...: see remember).\n"
     "A Hugging Face model folder (packed or not) --to gguf is written as\n"
     "llama.cpp's converter writes it (--out-dtype f32|f16|bf16|q8_0|tq1_0|tq2_0|\n"
     "auto); --to\n"
     "gguf-Q4_K_M (any GGUF file type, with forget's llama-quantize options)\n"
     "quantizes it in the same pass, --via f32|f16|bf16|auto naming the converter's\n"
     "output type (default f16).\n"
     "A split GGUF (NAME-0000K-of-0000N.gguf: any shard opens them all) --to gguf\n"
     "is merged into one file as llama-gguf-split's merge writes it;\n"
     "--split-max-tensors N or --split-max-size N(M|G) (decimal) writes\n"
     "OUT-0000K-of-0000N.gguf shards as llama-gguf-split's split does (-o OUT or\n"
     "OUT.gguf). Both copy a GGUF's tensors as stored, quantized ones too, unless\n"
     "--out-dtype names a float dtype.\n"},
    {"plugins", NULL,
     "usage: amn plugins [--json]\n"
     "List the plugins found (loaded, shadowed or rejected, with the reason), the\n"
     "formats and schemes each provides, and the conversion matrix.\n"},
    {"forget", "quantize",
     "usage: amn forget FILE --to bnb-nf4|bnb-nf4-dq|bnb-fp4|bnb-fp4-dq|bnb-int8\n"
     "                  [--block-size N] [--keep GLOB]... [-o OUT] [--force] [--threads N] "
     "[--json]\n"
     "       amn forget FILE --to Q4_K_M|Q8_0|IQ4_XS|... [--pure] [--output-tensor-type T]\n"
     "                  [--token-embedding-type T] [--leave-output-tensor]\n"
     "                  [--tensor-type PATTERN=T]... [--tensor-type-file FILE]...\n"
     "                  [--allow-requantize] [--override-kv KEY=TYPE:VALUE]...\n"
     "                  [--prune-layers L0,L1,...] [--include-weights NAME]...\n"
     "                  [--exclude-weights NAME]... [--imatrix FILE] [--dry-run]\n"
     "                  [--keep-split] [-o OUT.gguf]\n"
     "                  [--opt KEY=VALUE]... [--force] [--threads N] [--json]\n"
     "Quantize FILE's linear-layer weights (2-D *.weight; embeddings and lm_head stay)\n"
     "as bitsandbytes and transformers save them; everything else is copied. --keep\n"
     "keeps more; --block-size (4-bit: a power of two from 32 to 4096, default 64).\n"
     "Quantized inputs are dequantized first. When FILE's folder has config.json, one\n"
     "with quantization_config is written beside the output. `amn convert FILE --to\n"
     "bnb-nf4` is the same. A model folder as FILE, or -o DIR/, writes a model\n"
     "folder (shards of at most --shard-size SIZE, config.json with the\n"
     "quantization_config, the other files copied).\n"
     "A GGUF input with --to one of llama-quantize's file types (Q4_0 Q4_1 Q5_0 Q5_1\n"
     "Q8_0 Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K IQ4_NL IQ4_XS\n"
     "IQ3_S IQ3_M TQ1_0 TQ2_0 MXFP4_MOE Q1_0 Q2_0 F16 BF16 F32; with --imatrix also\n"
     "IQ1_S IQ1_M IQ2_XXS IQ2_XS IQ2_S IQ2_M IQ3_XXS IQ3_XS; Q3_K Q4_K Q5_K for the _M\n"
     "types; COPY: every tensor as it is; any case) writes the\n"
     "GGUF llama-quantize writes: its per-tensor types, tensor order, data bytes and\n"
     "metadata (also `amn convert FILE --to gguf-Q4_K_M`). --imatrix FILE: an\n"
     "importance matrix (llama-imatrix's GGUF or legacy .dat), used as llama-quantize\n"
     "uses it: weighted quantization, its type choices, the quantize.imatrix.* keys;\n"
     "a tensor without an entry is quantized without one; an entry of the wrong\n"
     "length (but token_embd's), a non-finite value, or no entry where the type needs\n"
     "one is an error before anything is written. Without --imatrix, types that need\n"
     "one are refused with llama-quantize's reason. llama-quantize's options: --pure (the default "
     "type everywhere), --output-tensor-type T and\n"
     "--token-embedding-type T (ggml types: q8_0, Q6_K, f16...), --leave-output-tensor,\n"
     "--tensor-type PATTERN=T (regex, repeatable, first match wins), --allow-requantize\n"
     "(a quantized GGUF input, dequantized as ggml does), --tensor-type-file FILE\n"
     "(its whitespace-separated PATTERN=T words, in its place among --tensor-type),\n"
     "--override-kv KEY=int:N|float:X|bool:true|false|str:TEXT (set last, int as\n"
     "u32 |N|), --prune-layers L0,L1,... (those layers dropped, the others numbered\n"
     "on, {arch}.block_count set; any layers, where llama-quantize fails unless they\n"
     "are the last), --include-weights / --exclude-weights NAME (filter an importance\n"
     "matrix by substring, so output.weight also names attn_output.weight; no effect\n"
     "without one; not both), --dry-run (print llama-quantize's per-tensor and total\n"
     "sizes, write nothing). Where these are silent, amn does what llama-quantize\n"
     "does. A split GGUF input (NAME-0000K-of-0000N.gguf: any shard opens them all)\n"
     "is quantized as one model; --keep-split writes one OUT-0000K-of-0000N.gguf per\n"
     "input shard (-o OUT or OUT.gguf), the same tensors in each and split.* as\n"
     "llama-quantize --keep-split writes them (not with --prune-layers or\n"
     "--dry-run); every shard is written before any is renamed into place, shard 1\n"
     "last. A non-GGUF input gets the\n"
     "file type's default type for every 2-D *weight that is not a norm. 1-D tensors\n"
     "are F32 in every GGUF output. --opt KEY=VALUE: an option of the target's writer\n"
     "(--opt endian=big: a big-endian GGUF).\n"},
    {"scan", NULL,
     "usage: amn scan FILE... [--json] [--from FORMAT]\n"
     "Audit each FILE without loading it (nothing is executed): every pickle global,\n"
     "every opcode that could call code, nested pickles, container anomalies; a\n"
     "verdict per file. Exit 0 all safe, 5 any unsafe, 1 any unreadable.\n"},
};

int cli_exit_code(int code) {
    switch (code) {
    case AMN_OK:
        return EXIT_OK;
    case AMN_E_PARSE:
        return EXIT_PARSE;
    case AMN_E_UNSUPPORTED:
        return EXIT_UNSUPPORTED;
    case AMN_E_LIMIT:
        return EXIT_LIMIT;
    case AMN_E_DISALLOWED:
        return EXIT_DISALLOWED;
    case AMN_E_IO:
        return EXIT_IO;
    case AMN_E_NOMEM:
        return EXIT_NOMEM;
    default:
        return EXIT_USAGE;
    }
}

int cli_fail(const amn_error *err) {
    if (cli_json_on()) return cli_json_error(cli_exit_code(err->code), err->msg);
    /* Messages may quote file contents: show control characters escaped. */
    const char *cls = amn_error_class(err->code);
    if (strncmp(err->msg, cls, strlen(cls)) == 0)
        fputs("amn: ", stderr);
    else
        fprintf(stderr, "amn: %s: ", cls);
    for (const unsigned char *c = (const unsigned char *)err->msg; *c; c++) {
        if (*c < 0x20 || *c == 0x7f)
            fprintf(stderr, "\\x%02x", *c);
        else
            fputc(*c, stderr);
    }
    fputc('\n', stderr);
    return cli_exit_code(err->code);
}

static int find_command(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (strcmp(name, commands[i].name) == 0 ||
            (commands[i].alias && strcmp(name, commands[i].alias) == 0))
            return (int)i;
    return -1;
}

int cli_usage_fail(const char *cmd, const char *message) {
    if (cli_json_on()) return cli_json_error(EXIT_USAGE, message);
    fprintf(stderr, "amn %s: %s\n(see amn %s --help)\n", cmd, message, cmd);
    return EXIT_USAGE;
}

static int usage_error(const char *cmd, const char *fmt, const char *arg) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, arg);
    return cli_usage_fail(cmd, msg);
}

char *cli_arg_text(char **text, size_t *used, size_t cap, size_t need) {
    if (need > cap - *used) return NULL;
    if (!*text && !(*text = malloc(cap))) return NULL;
    char *dst = *text + *used;
    *used += need;
    return dst;
}

/* --opt KEY=VALUE as it is; --gguf-kv V and --gguf-metadata F are the GGUF
 * writer's options kv=V and metadata=F. */
static int add_option(cli_args *a, const char *flag, const char *value) {
    const char *prefix = strcmp(flag, "--gguf-kv") == 0         ? "kv="
                         : strcmp(flag, "--gguf-metadata") == 0 ? "metadata="
                                                                : "";
    if (strcmp(flag, "--gguf-metadata") != 0 && !strchr(value, '='))
        return usage_error(a->command, "%s: want KEY=VALUE", value);
    const size_t need = strlen(prefix) + strlen(value) + 1;
    char *dst = a->n_opts == sizeof a->opts / sizeof *a->opts
                    ? NULL
                    : cli_arg_text(&a->opt_text, &a->opt_used, CLI_OPT_TEXT_MAX, need);
    if (!dst) return usage_error(a->command, "too many options (at %s)", flag);
    snprintf(dst, need, "%s%s", prefix, value);
    a->opts[a->n_opts++] = dst;
    return EXIT_OK;
}

static int parse_args(int argc, char **argv, int first, cli_args *a) {
    for (int i = first; i < argc; i++) {
        const char *s = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VALUE()                                                                               \
    do {                                                                                           \
        if (!next) return usage_error(a->command, "%s needs a value", s);                          \
        i++;                                                                                       \
    } while (0)
        int lim = cli_limit_option(a, s, next);
        if (lim < 0) return -lim;
        if (lim) {
            i++;
            continue;
        }
        const int enc = cli_encode_option(a, s, next);
        if (enc < 0) return -enc;
        if (enc) {
            i += enc - 1;
            continue;
        }
        if (strcmp(s, "--json") == 0)
            a->json = true;
        else if (strcmp(s, "--quiet") == 0 || strcmp(s, "-q") == 0)
            a->quiet = true;
        else if (strcmp(s, "--progress") == 0)
            a->progress = true;
        else if (strcmp(s, "--no-sync") == 0)
            a->no_sync = true;
        else if (strcmp(s, "--force") == 0)
            a->force = true;
        else if (strcmp(s, "--full") == 0)
            a->full = true;
        else if (strcmp(s, "-o") == 0 || strcmp(s, "--output") == 0) {
            NEED_VALUE();
            a->output = next;
        } else if (strcmp(s, "--to") == 0) {
            NEED_VALUE();
            a->to = next;
        } else if (strcmp(s, "--out-dtype") == 0) {
            NEED_VALUE();
            a->out_dtype = next;
        } else if (strcmp(s, "--via") == 0) {
            NEED_VALUE();
            a->via = next;
        } else if (strcmp(s, "--from") == 0) {
            NEED_VALUE();
            a->from = next;
        } else if (strcmp(s, "--opt") == 0 || strcmp(s, "--gguf-kv") == 0 ||
                   strcmp(s, "--gguf-metadata") == 0) {
            NEED_VALUE();
            int rc = add_option(a, s, next);
            if (rc) return rc;
        } else if (strcmp(s, "--keep") == 0) {
            NEED_VALUE();
            if (a->n_keep == sizeof a->keep / sizeof *a->keep)
                return usage_error(a->command, "too many %s", "--keep");
            a->keep[a->n_keep++] = next;
        } else if (strcmp(s, "--block-size") == 0) {
            NEED_VALUE();
            a->block_size = next;
        } else if (strcmp(s, "--shard-size") == 0) {
            NEED_VALUE();
            a->shard_size = next;
        } else if (strcmp(s, "--only-shards") == 0) {
            NEED_VALUE();
            a->only_shards = next;
        } else if (strcmp(s, "--write-index") == 0) {
            a->write_index = true;
        } else if (strcmp(s, "--resume") == 0) {
            a->resume = true;
        } else if (strcmp(s, "--dedup-tied") == 0) {
            a->dedup_tied = true;
        } else if (strcmp(s, "--split-max-tensors") == 0) {
            NEED_VALUE();
            a->split_max_tensors = next;
        } else if (strcmp(s, "--split-max-size") == 0) {
            NEED_VALUE();
            a->split_max_size = next;
        } else if (strcmp(s, "--threads") == 0) {
            NEED_VALUE();
            char *end;
            long n = strtol(next, &end, 10);
            if (*end || n < 0 || n > 64) return usage_error(a->command, "bad --threads %s", next);
            a->threads = n ? (unsigned)n : 1;
        } else if (s[0] == '-' && s[1]) {
            return usage_error(a->command, "unknown option %s", s);
        } else if (!a->input || a->multi_input) {
            if (!a->input) a->input = s;
            a->inputs[a->n_inputs++] = s;
        } else {
            return usage_error(a->command, "unexpected argument %s", s);
        }
#undef NEED_VALUE
    }
    return EXIT_OK;
}

static int run_command(int c, cli_args *a, const char **dirs, size_t n_dirs) {
    cli_signals_install();
    amn_ctx_options opts = {
        .struct_size = sizeof(amn_ctx_options), .plugin_dirs = dirs, .n_plugin_dirs = n_dirs};
    amn_ctx *ctx;
    amn_error err = {0};
    if (amn_ctx_new(&opts, &ctx, &err)) return cli_fail(&err);
    int rc;
    switch (c) {
    case CMD_PARSE:
        rc = cmd_parse(ctx, a, false);
        break;
    case CMD_INSPECT:
        rc = cmd_inspect(ctx, a);
        break;
    case CMD_REMEMBER:
        rc = cmd_remember(ctx, a, false);
        break;
    case CMD_CONVERT:
        rc = cmd_remember(ctx, a, true);
        break;
    case CMD_FORGET:
        rc = cmd_forget(ctx, a);
        break;
    default:
        rc = cmd_plugins(ctx, a);
        break;
    }
    amn_ctx_free_keep_modules(ctx); /* the process exits next: no module unmapping */
    return rc;
}

int main(int argc, char **argv) {
    const char *dirs[16];
    size_t n_dirs = 0;
    int i = 1;
    for (; i < argc; i++) {
        if (strcmp(argv[i], "--version") == 0 || strcmp(argv[i], "-V") == 0) {
            /* The kernels' level: what the CPU offers, lowered by AMN_SIMD. */
            printf("amn %s (plugin ABI %d.%d, kernels %s)\n", AMN_VERSION_STRING,
                   AMN_PLUGIN_ABI_MAJOR, AMN_PLUGIN_ABI_MINOR, amn_simd_name(amn_simd_level()));
            return EXIT_OK;
        }
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_main, stdout);
            return EXIT_OK;
        }
        if (strcmp(argv[i], "--plugin-dir") == 0 && i + 1 < argc && n_dirs < 16) {
            dirs[n_dirs++] = argv[++i];
            continue;
        }
        break;
    }
    for (int k = i; k < argc; k++)
        if (strcmp(argv[k], "--json") == 0) cli_json_set(true); /* errors as JSON from here */
    if (i >= argc) {
        if (cli_json_on()) return cli_json_error(EXIT_USAGE, "no command given");
        fputs(usage_main, stderr);
        return EXIT_USAGE;
    }
    int c = find_command(argv[i]);
    if (c < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "unknown command '%s'", argv[i]);
        if (cli_json_on()) return cli_json_error(EXIT_USAGE, msg);
        fprintf(stderr, "amn: %s\n\n%s", msg, usage_main);
        return EXIT_USAGE;
    }
    for (int k = i + 1; k < argc; k++)
        if (strcmp(argv[k], "--help") == 0 || strcmp(argv[k], "-h") == 0) {
            fputs(commands[c].help, stdout);
            if (c != CMD_PLUGINS && c != CMD_SCAN) fputs("\n" CLI_LIMITS_HELP, stdout);
            return EXIT_OK;
        }
    if (c == CMD_SCAN) { /* several files, its own arguments */
        amn_ctx_options so = {
            .struct_size = sizeof(amn_ctx_options), .plugin_dirs = dirs, .n_plugin_dirs = n_dirs};
        amn_ctx *sctx;
        amn_error serr = {0};
        if (amn_ctx_new(&so, &sctx, &serr)) return cli_fail(&serr);
        int src = cmd_scan(sctx, argc - i - 1, argv + i + 1);
        amn_ctx_free_keep_modules(sctx); /* the process exits next */
        return src;
    }
    const char **inputs = calloc((size_t)argc, sizeof *inputs);
    if (!inputs) return EXIT_NOMEM;
    cli_args a = {.command = commands[c].name, .inputs = inputs, .multi_input = c == CMD_INSPECT};
    int rc = parse_args(argc, argv, i + 1, &a);
    if (!rc && c != CMD_PLUGINS && !a.input) rc = usage_error(a.command, "%s", "missing FILE");
    if (!rc) rc = run_command(c, &a, dirs, n_dirs);
    free(a.opt_text);
    free(a.enc_text);
    free(inputs);
    return rc;
}
