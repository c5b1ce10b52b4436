/* Planning: schemes claim groups of tensors; the rest pass through. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_internal.h"
#include "util_internal.h"
#include "amn/checked.h"
#include "plan_internal.h"
#include "registry_internal.h"

bool amn_claimset_is_claimed(const amn_claimset *cs, size_t i) {
    return i < cs->n_tensors && cs->owner[i] >= 0;
}

static void free_group(group *g) {
    if (g->spec.plan_free && g->spec.plan) g->spec.plan_free(g->spec.plan);
    free((char *)g->spec.out_name);
    free((char *)g->spec.label);
}

int amn_claimset_add(amn_claimset *cs, const amn_group_spec *in, amn_error *err) {
    if (in->struct_size < AMNI_GROUP_SPEC_SIZE_2_0) {
        /* Too small to trust even plan_free: the plan cannot be released. */
        return amn_error_set(err, AMN_E_INVALID,
                             "group struct_size %u is smaller than plugin ABI 2.0's (%zu)",
                             in->struct_size, (size_t)AMNI_GROUP_SPEC_SIZE_2_0);
    }
    amn_group_spec full;
    amni_copy_sized(&full, sizeof full, in);
    const amn_group_spec *g = &full;
    group ng = {.spec = *g, .scheme = cs->current};
    ng.spec.out_name = NULL;
    ng.spec.label = NULL;
    int rc = AMN_OK;
    const char *who = g->out_name ? g->out_name : "(dropped group)";
    if (g->n_members == 0 || g->n_members > AMN_GROUP_MAX_MEMBERS || g->ndim > AMN_MAX_DIMS)
        rc = amn_error_set(err, AMN_E_INVALID, "%s: bad group shape or member count", who);
    for (size_t k = 0; !rc && k < g->n_members; k++) {
        size_t i = g->members[k];
        if (i >= cs->n_tensors)
            rc = amn_error_set(err, AMN_E_INVALID, "%s: member %zu out of range", who, i);
        else if (cs->owner[i] >= 0)
            rc = amn_error_set(err, AMN_E_PARSE, "tensor %s is claimed by two quantized weights",
                               amn_model_tensor(cs->model, i)->name);
        for (size_t j = 0; !rc && j < k; j++)
            if (g->members[j] == i)
                rc = amn_error_set(err, AMN_E_INVALID, "%s: member listed twice", who);
    }
    if (!rc && g->out_name) {
        uint64_t numel = 1;
        for (uint32_t d = 0; d < g->ndim; d++)
            if (!amn_mul_u64(numel, g->shape[d], &numel))
                rc = amn_error_set(err, AMN_E_PARSE, "%s: output shape overflows", who);
        if (!rc && (g->row_elems == 0 || numel % g->row_elems))
            rc = amn_error_set(err, AMN_E_INVALID, "%s: row size does not divide the tensor", who);
    }
    if (!rc && g->out_name && !(ng.spec.out_name = amni_strdup(g->out_name)))
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc && g->label && !(ng.spec.label = amni_strdup(g->label)))
        rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
    if (!rc && cs->n_groups == cs->cap_groups) {
        size_t nc = cs->cap_groups ? cs->cap_groups * 2 : 64;
        group *p = realloc(cs->groups, nc * sizeof *p);
        if (!p)
            rc = amn_error_set(err, AMN_E_NOMEM, "out of memory");
        else
            cs->groups = p, cs->cap_groups = nc;
    }
    if (rc) {
        free_group(&ng);
        return rc;
    }
    for (size_t k = 0; k < g->n_members; k++) {
        cs->owner[g->members[k]] = (int64_t)cs->n_groups;
        cs->role[g->members[k]] = g->roles[k] ? g->roles[k] : AMN_ROLE_AUX;
    }
    cs->groups[cs->n_groups++] = ng;
    return AMN_OK;
}

void amn_plan_free(amn_plan *p) {
    if (!p) return;
    for (size_t i = 0; i < p->cs.n_groups; i++) free_group(&p->cs.groups[i]);
    free(p->cs.groups);
    free(p->cs.role);
    free(p->cs.owner);
    free(p->unhandled);
    free(p);
}

/* Which tensors no scheme claimed look quantized, and why: the known layouts
 * (known.c) and the method the model's settings declare. */
static int find_unhandled(amn_plan *p, const amn_model *m, amn_error *err) {
    const size_t n = p->cs.n_tensors;
    amni_quant_decl_load(m, &p->decl);
    p->unhandled = calloc(n ? n : 1, sizeof *p->unhandled);
    if (!p->unhandled) return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (p->cs.owner[i] < 0) amni_known_quantized_tensor(m, i, &p->decl, &p->unhandled[i]);
    return AMN_OK;
}

bool amn_plan_tensor_unhandled(const amn_plan *p, size_t i, const char **what,
                               const char **plugin) {
    if (i >= p->cs.n_tensors || !p->unhandled || !p->unhandled[i].what) return false;
    if (what) *what = p->unhandled[i].what;
    if (plugin) *plugin = p->unhandled[i].plugin;
    return true;
}

static bool scheme_loaded(const amn_ctx *ctx, const char *name) {
    for (size_t i = 0; i < amn_ctx_scheme_count(ctx); i++)
        if (strcmp(amn_ctx_scheme(ctx, i)->name, name) == 0) return true;
    return false;
}

int amni_plan_check_unclaimed(const amn_plan *p, const amn_model *m, amn_error *err) {
    size_t count = 0;
    const amni_unhandled *first = NULL;
    char names[256] = "";
    for (size_t i = 0; i < p->cs.n_tensors; i++) {
        if (!p->unhandled || !p->unhandled[i].what) continue;
        const amn_tensor *t = amn_model_tensor(m, i);
        if (!first) first = &p->unhandled[i];
        if (count < 3) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s (%s)", count ? ", " : "", t->name,
                     t->dtype == AMN_DTYPE_BLOCK && t->encoding_name ? t->encoding_name
                                                                     : amn_dtype_name(t->dtype));
        }
        count++;
    }
    if (!count) return AMN_OK;
    char decl[160] = "";
    if (p->decl.method[0])
        snprintf(decl, sizeof decl, "; %s declares quant_method \"%s\"%s%s%s", p->decl.file,
                 p->decl.method, p->decl.format[0] ? ", format \"" : "", p->decl.format,
                 p->decl.format[0] ? "\"" : "");
    const char *plugin = first->plugin;
    char head[512];
    snprintf(head, sizeof head, "unsupported: %zu quantized tensor%s of %s (%s%s%s)", count,
             count == 1 ? "" : "s", first->what, names, count > 3 ? ", ..." : "", decl);
    if (plugin && scheme_loaded(p->ctx, plugin))
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "%s cannot be dequantized by the loaded amn-%s plugin", head, plugin);
    if (!plugin)
        return amn_error_set(err, AMN_E_UNSUPPORTED,
                             "%s: no amn plugin dequantizes this method; refusing to copy them "
                             "as plain tensors",
                             head);
    return amn_error_set(
        err, AMN_E_UNSUPPORTED,
        "%s need a scheme no loaded plugin provides; install the amn-plugin-%s package", head,
        plugin);
}

static int check_names(const amn_plan *p, const amn_model *m, amn_error *err) {
    /* An output name must not collide with a passthrough tensor or another group. */
    for (size_t g = 0; g < p->cs.n_groups; g++) {
        const char *name = p->cs.groups[g].spec.out_name;
        if (!name) continue;
        int64_t i = amn_model_find(m, name);
        if (i >= 0 && p->cs.owner[i] < 0)
            return amn_error_set(err, AMN_E_PARSE,
                                 "quantized weight %s collides with a plain tensor of that name",
                                 name);
        for (size_t h = 0; h < g; h++)
            if (p->cs.groups[h].spec.out_name && strcmp(p->cs.groups[h].spec.out_name, name) == 0)
                return amn_error_set(err, AMN_E_PARSE, "two quantized weights named %s", name);
    }
    return AMN_OK;
}

static int plan_build(const amn_ctx *ctx, const amn_model *m, amn_plan **out, amn_error *err) {
    *out = NULL;
    amn_plan *p = calloc(1, sizeof *p);
    const size_t n = amn_model_tensor_count(m);
    if (p) {
        p->ctx = ctx;
        p->cs.model = m;
        p->cs.n_tensors = n;
        p->cs.role = calloc(n ? n : 1, 1);
        p->cs.owner = malloc((n ? n : 1) * sizeof *p->cs.owner);
    }
    if (!p || !p->cs.role || !p->cs.owner) {
        amn_plan_free(p);
        return amn_error_set(err, AMN_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++) p->cs.owner[i] = -1;
    int rc = AMN_OK;
    /* The loaded schemes, in search order (ctx->schemes, not the public
     * accessors, which would load every plugin). */
    amni_registry_lock(ctx); /* the list does not change while it is walked */
    for (size_t s = 0; !rc && s < ctx->n_schemes; s++) {
        p->cs.current = ctx->schemes[s];
        rc = p->cs.current->detect(m, &p->cs, err);
    }
    amni_registry_unlock(ctx);
    if (!rc) rc = check_names(p, m, err);
    if (!rc) rc = find_unhandled(p, m, err);
    if (rc) {
        amn_plan_free(p);
        return rc;
    }
    *out = p;
    return AMN_OK;
}

static bool plan_is_plain(const amn_plan *p) {
    if (p->decl.method[0]) return false;
    for (size_t i = 0; i < p->cs.n_tensors; i++)
        if (p->unhandled[i].what) return false;
    return true;
}

/* Only the scheme plugins whose detect keys match a tensor of m are loaded
 * (the registry cache). A scheme whose keys match nothing claims nothing, so
 * the plan is the one a full registry makes. Anything less plain (a failure,
 * a tensor that looks quantized but is unclaimed, a declared quant method)
 * is planned again with every plugin loaded, so that errors and messages
 * ("install the amn-plugin-X package") are exactly a full registry's. */
int amn_plan_new(const amn_ctx *ctx, const amn_model *m, amn_plan **out, amn_error *err) {
    const bool all = amni_registry_load_for_model(ctx, m);
    int rc = plan_build(ctx, m, out, err);
    if (all || (rc == AMN_OK && plan_is_plain(*out))) return rc;
    amn_plan_free(*out);
    *out = NULL;
    amni_registry_load_all(ctx);
    return plan_build(ctx, m, out, err);
}

int amn_plan_summarize(const amn_plan *p, amn_dtype out, amn_plan_summary *dst) {
    amn_plan_summary sum = {.struct_size = sizeof sum}, *s = &sum;
    const amn_model *m = p->cs.model;
    const uint64_t osz = amn_dtype_size(out) ? amn_dtype_size(out) : 2;
    for (size_t i = 0; i < p->cs.n_tensors; i++) {
        const amn_tensor *t = amn_model_tensor(m, i);
        amn_add_u64(s->current_bytes, t->nbytes, &s->current_bytes);
        switch (p->cs.role[i]) {
        case 0:
            s->passthrough++;
            amn_add_u64(s->after_bytes, t->nbytes, &s->after_bytes);
            break;
        case AMN_ROLE_WEIGHT:
            s->quantized++;
            break;
        case AMN_ROLE_SCALE:
            s->scales++;
            break;
        case AMN_ROLE_ZERO:
            s->zeros++;
            break;
        case AMN_ROLE_GROUP_INDEX:
            s->group_indices++;
            break;
        case AMN_ROLE_ACT_SCALE:
            s->dropped++;
            break;
        default:
            s->aux++;
            break;
        }
    }
    for (size_t i = 0; i < p->cs.n_tensors; i++) {
        if (!p->unhandled || !p->unhandled[i].what) continue;
        s->unhandled++;
        if (!s->missing_plugin) s->missing_plugin = p->unhandled[i].plugin;
    }
    for (size_t g = 0; g < p->cs.n_groups; g++) {
        const group *gr = &p->cs.groups[g];
        if (!gr->spec.out_name) continue;
        uint64_t numel = 1, bytes;
        for (uint32_t d = 0; d < gr->spec.ndim; d++) amn_mul_u64(numel, gr->spec.shape[d], &numel);
        if (amn_mul_u64(numel, osz, &bytes)) amn_add_u64(s->after_bytes, bytes, &s->after_bytes);
        s->groups++;
        if (!s->scheme)
            s->scheme = gr->scheme->name;
        else if (strcmp(s->scheme, gr->scheme->name) != 0)
            s->scheme = "mixed";
        if (gr->spec.label) {
            if (!s->label)
                s->label = gr->spec.label;
            else if (strcmp(s->label, gr->spec.label) != 0)
                s->labels_differ = true;
        }
    }
    return amni_struct_out(dst, s, sizeof *s, AMNI_PLAN_SUMMARY_SIZE_1, "amn_plan_summary", NULL);
}

size_t amn_plan_group_count(const amn_plan *p) {
    return p->cs.n_groups;
}

int amn_plan_group(const amn_plan *p, size_t i, amn_group_info *out) {
    if (i >= p->cs.n_groups) return AMN_E_INVALID;
    const group *g = &p->cs.groups[i];
    const amn_group_info info = {
        .struct_size = sizeof info,
        .out_name = g->spec.out_name,
        .label = g->spec.label,
        .scheme = g->scheme ? g->scheme->name : NULL,
        .ndim = g->spec.ndim,
        .shape = g->spec.shape,
        .n_members = g->spec.n_members,
        .members = g->spec.members,
        .roles = g->spec.roles,
    };
    return amni_struct_out(out, &info, sizeof info, AMNI_GROUP_INFO_SIZE_1, "amn_group_info", NULL);
}

int amn_plan_group_rows(const amn_plan *p, size_t i, uint64_t *rows, uint64_t *row_elems,
                        amn_error *err) {
    if (i >= p->cs.n_groups)
        return amn_error_set(err, AMN_E_INVALID, "group %zu out of range (%zu groups)", i,
                             p->cs.n_groups);
    const group *g = &p->cs.groups[i];
    if (!g->spec.out_name)
        return amn_error_set(err, AMN_E_INVALID, "group %zu has no output (dropped members)", i);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < g->spec.ndim; d++)
        if (!amn_mul_u64(numel, g->spec.shape[d], &numel))
            return amn_error_set(err, AMN_E_LIMIT, "%s: element count overflows", g->spec.out_name);
    *row_elems = g->spec.row_elems; /* non-zero and dividing numel: checked at claim time */
    *rows = numel / g->spec.row_elems;
    return AMN_OK;
}

int amn_plan_dequantize(const amn_plan *p, size_t i, uint64_t row0, uint64_t nrows, amn_dtype out,
                        void *dst, amn_error *err) {
    uint64_t rows, re;
    int rc = amn_plan_group_rows(p, i, &rows, &re, err);
    if (rc) return rc;
    const group *g = &p->cs.groups[i];
    if (out != AMN_DTYPE_F32 && out != AMN_DTYPE_F16 && out != AMN_DTYPE_BF16)
        return amn_error_set(err, AMN_E_INVALID, "%s: dequantize to %s: only F32, F16 or BF16",
                             g->spec.out_name, amn_dtype_name(out));
    if (row0 > rows || nrows > rows - row0)
        return amn_error_set(err, AMN_E_INVALID,
                             "%s: rows [%llu, +%llu) outside the tensor's %llu rows",
                             g->spec.out_name, (unsigned long long)row0, (unsigned long long)nrows,
                             (unsigned long long)rows);
    for (size_t k = 0; k < g->spec.n_members; k++) {
        const amn_tensor *t = amn_model_tensor(p->cs.model, g->spec.members[k]);
        if (!t->data && t->nbytes)
            return amn_error_set(err, AMN_E_INVALID,
                                 "%s: the model was inspected (header only), not opened",
                                 g->spec.out_name);
    }
    if (nrows == 0) return AMN_OK;
    return g->scheme->dequantize(p->cs.model, g->spec.plan, row0, nrows, out, dst, err);
}

int amn_plan_tensor_role(const amn_plan *p, size_t i) {
    return i < p->cs.n_tensors ? p->cs.role[i] : 0;
}
