/* A synthetic task as a data source of the training loop: the generated
 * stream, the held-out set, the answer score; and its file in a run folder,
 * from which `train --resume` and `eval` rebuild it (see tasks.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/shard.h"
#include "tasks/tasks.h"
#include "io/atomic_file.h"
#include "diffattn/formats.h"

/* The stream of run seed s is s * 0x9E3779B97F4A7C15 + point, the held-out
 * set 0xE7A15E7 + point: a seed no training stream uses, the same for every
 * architecture and seed of a sweep point. */
static uint64_t stream_seed(void *self, uint64_t seed) {
    return seed * 0x9E3779B97F4A7C15ULL + (uint64_t)((da_task_source *)self)->point;
}

static void next(void *self, da_rng *rng, int B, int phase, int stride, int T, int *tokens, int *targets) {
    da_task_source *s = self;
    (void)T;
    for (int j = 0, kept = 0; j < B; j++) {
        const int mine = j % stride == phase;
        const size_t o = (size_t)kept * s->T;
        da_task_sample(&s->task, rng, mine ? tokens + o : s->scratch, mine ? targets + o : s->scratch + s->T, NULL);
        kept += mine;
    }
}

static void held_out(void *self, long i, long n, int T, int *tokens, int *targets) {
    const da_task_source *s = self;
    (void)n;
    memcpy(tokens, s->tokens + (size_t)i * T, (size_t)T * sizeof(int));
    memcpy(targets, s->targets + (size_t)i * T, (size_t)T * sizeof(int));
}

da_data_source da_task_source_of(da_task_source *s) {
    return (da_data_source){s, s->task.vocab, s->T, s->n, stream_seed, next, held_out, da_task_score(s->task.kind)};
}

da_status da_task_source_create(da_task_source **out, const da_task_config *t, int point, int n_held_out) {
    return task_source_new(out, t, point, n_held_out, 0xE7A15E7ULL + (uint64_t)point);
}

da_status task_source_new(da_task_source **out, const da_task_config *t, int point, int n_held_out, uint64_t seed) {
    *out = NULL;
    da_status st = da_task_validate(t);
    if (st.code) return st;
    if (n_held_out < 1 || n_held_out > 1 << 20 || point < 0)
        return da_errorf("held-out sequences: %d (1..%d), sweep point %d", n_held_out, 1 << 20, point);
    da_task_source *s = calloc(1, sizeof *s);
    const size_t sz = (size_t)n_held_out * t->seq * sizeof(int);
    if (s) s->tokens = malloc(sz), s->targets = malloc(sz), s->src = malloc(sz);
    if (s) s->scratch = malloc(2 * (size_t)t->seq * sizeof(int));
    if (!s || !s->tokens || !s->targets || !s->src || !s->scratch) {
        da_task_source_free(s);
        return da_errorf("out of memory for %d held-out sequences", n_held_out);
    }
    s->task = *t, s->point = point, s->n = n_held_out, s->T = t->seq;
    da_rng r;
    da_rng_seed(&r, seed);
    for (int i = 0; i < s->n; i++) {
        const size_t o = (size_t)i * s->T;
        s->answers += t->kind == DA_TASK_COUNTERFACTUAL /* held out: episodes only, no memory sequences */
                          ? da_cf_episode(t, &r, s->tokens + o, s->targets + o, s->src + o, NULL)
                          : da_task_sample(t, &r, s->tokens + o, s->targets + o, s->src + o);
    }
    *out = s;
    return da_ok();
}

void da_task_source_free(da_task_source *s) {
    if (!s) return;
    free(s->tokens), free(s->targets), free(s->src), free(s->scratch);
    free(s);
}

/* ---------------------------------------------------------------- the task file */

#define TASK_FILE_MAGIC "diffattn task 1"

static da_status save_task_file(const da_task_source *s, const char *path) {
    const da_task_config *t = &s->task;
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    fprintf(af.fp,
            TASK_FILE_MAGIC "\nkind %s\nseq %d\nvocab %d\npairs %d\nalpha %.17g\nnoise %.17g\nnoise_vocab %d\n"
                            "demos %d\nclasses %d\nsymbols %d\nentities %d\nattributes %d\ncontext_pairs %d\n"
                            "memory_share %.17g\nfacts_seed %" PRIu64 "\nvalue_len %d\nneedles %d\nhops %d\n"
                            "cw_ratio %.17g\npoint %d\nheld_out %d\n",
            da_task_name(t->kind), t->seq, t->vocab, t->pairs, t->alpha, t->noise, t->noise_vocab, t->demos,
            t->classes, t->symbols, t->entities, t->attributes, t->context_pairs, t->memory_share, t->facts_seed,
            t->value_len, t->needles, t->hops, t->cw_ratio, s->point, s->n);
    if (t->interleave) fprintf(af.fp, "interleave 1\n"); /* absent: the keys, then the answers */
    if (t->n_depths) { /* absent: uniform depths */
        fprintf(af.fp, "depths ");
        for (int i = 0; i < t->n_depths; i++) fprintf(af.fp, "%s%.17g", i ? "," : "", t->depths[i]);
        fprintf(af.fp, "\n");
    }
    if (ferror(af.fp)) return da_atomic_fail(&af, errno);
    return da_atomic_commit(&af);
}

/* The held-out sequences one after another as a token shard (data/shard.h). */
static da_status save_shard(const da_task_source *s, const char *path) {
    const da_shard_header h = {DA_SHARD_MAGIC, DA_SHARD_VERSION, (uint32_t)s->task.vocab, 0, (uint64_t)s->n * s->T};
    da_atomic_file af;
    da_status st = da_atomic_open(&af, path);
    if (st.code) return st;
    fwrite(&h, sizeof h, 1, af.fp);
    for (size_t i = 0; i < (size_t)s->n * s->T; i++) {
        const uint32_t id = (uint32_t)s->tokens[i];
        fwrite(&id, sizeof id, 1, af.fp);
    }
    if (ferror(af.fp)) return da_atomic_fail(&af, errno);
    return da_atomic_commit(&af);
}

da_status da_task_source_save(const da_task_source *s, const char *dir) {
    char path[4300];
    snprintf(path, sizeof path, "%s/held_out", dir);
    da_status st = da_make_dirs(path);
    snprintf(path, sizeof path, "%s/task.txt", dir);
    if (!st.code) st = save_task_file(s, path);
    snprintf(path, sizeof path, "%s/held_out/train_000000.bin", dir);
    if (!st.code) st = save_shard(s, path);
    snprintf(path, sizeof path, "%s/held_out/val_000000.bin", dir);
    if (!st.code) st = save_shard(s, path);
    return st;
}

int da_task_file_is(const char *path) {
    char line[32] = "";
    FILE *fp = da_fopen_regular(path, NULL);
    if (!fp) return 0;
    const int is = fgets(line, sizeof line, fp) && !strcmp(line, TASK_FILE_MAGIC "\n");
    fclose(fp);
    return is;
}

/* "0.1,0.5,0.9" into t's depths (their range is the task's check). */
static da_status parse_depths(const char *val, da_task_config *t) {
    t->n_depths = 0;
    for (const char *p = val; *p;) {
        char *end;
        const double d = strtod(p, &end);
        if (end == p || (*end && *end != ',') || t->n_depths == DA_TASK_MAX_DEPTHS)
            return da_errorf("\"%s\" is not a list of at most %d numbers", val, DA_TASK_MAX_DEPTHS);
        t->depths[t->n_depths++] = d;
        p = *end ? end + 1 : end;
    }
    return da_ok();
}

da_status da_task_source_load(da_task_source **out, const char *path) {
    *out = NULL;
    da_status open_st;
    FILE *fp = da_fopen_regular(path, &open_st);
    if (!fp) return open_st;
    da_task_config t;
    da_task_config_default(&t, DA_TASK_MQAR);
    char line[256], key[64], val[128];
    int point = -1, n = -1, lines = 0;
    da_status st = fgets(line, sizeof line, fp) && !strcmp(line, TASK_FILE_MAGIC "\n")
                       ? da_ok()
                       : da_errorf("%s: not a task file (the first line is not \"" TASK_FILE_MAGIC "\")", path);
    while (!st.code && fgets(line, sizeof line, fp)) {
        char *end = NULL;
        if (sscanf(line, "%63s %127s", key, val) != 2) {
            st = da_errorf("%s: line %d: expected \"key value\"", path, lines + 2);
            break;
        }
        const long long v = strtoll(val, &end, 10);
        const int integral = *end == 0 && v >= 0 && v <= 1 << 30;
        double d = strtod(val, &end);
        if (!strcmp(key, "kind")) {
            if (da_task_parse(val, &t.kind)) st = da_errorf("%s: kind: unknown task \"%s\"", path, val);
            continue;
        }
        if (!strcmp(key, "depths")) {
            st = parse_depths(val, &t);
            if (st.code) st = da_errorf("%s: depths: %s", path, st.msg);
            continue;
        }
        if (!strcmp(key, "facts_seed")) {
            t.facts_seed = strtoull(val, &end, 10);
            if (*end) st = da_errorf("%s: facts_seed: \"%s\" is not an unsigned integer", path, val);
            continue;
        }
        int *ip = !strcmp(key, "seq") ? &t.seq : !strcmp(key, "vocab") ? &t.vocab : !strcmp(key, "pairs") ? &t.pairs
                : !strcmp(key, "noise_vocab") ? &t.noise_vocab : !strcmp(key, "demos") ? &t.demos
                : !strcmp(key, "classes") ? &t.classes : !strcmp(key, "symbols") ? &t.symbols
                : !strcmp(key, "entities") ? &t.entities : !strcmp(key, "attributes") ? &t.attributes
                : !strcmp(key, "context_pairs") ? &t.context_pairs : !strcmp(key, "point") ? &point
                : !strcmp(key, "held_out") ? &n : !strcmp(key, "value_len") ? &t.value_len
                : !strcmp(key, "needles") ? &t.needles : !strcmp(key, "hops") ? &t.hops
                : !strcmp(key, "interleave") ? &t.interleave : NULL;
        double *dp = !strcmp(key, "alpha") ? &t.alpha : !strcmp(key, "noise") ? &t.noise
                   : !strcmp(key, "memory_share") ? &t.memory_share : !strcmp(key, "cw_ratio") ? &t.cw_ratio : NULL;
        if (ip && integral) *ip = (int)v;
        else if (dp && !*end && d == d) *dp = d;
        else st = da_errorf("%s: %s: \"%s\" is %s", path, key, val, ip || dp ? "out of range" : "an unknown key");
        lines++;
    }
    fclose(fp);
    if (!st.code && (point < 0 || n < 1))
        st = da_errorf("%s: point and held_out must be given (held_out >= 1)", path);
    if (!st.code && (st = da_task_source_create(out, &t, point, n)).code) st = da_errorf("%s: %s", path, st.msg);
    return st;
}
