/* The tokens a constrained answer may take next: the vocabulary's byte
 * strings in a trie, walked depth first with the matcher's state, so a
 * prefix shared by many tokens is matched once and a dead prefix prunes
 * every token under it. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "infer/json_schema.h"

typedef struct {
    int child, sibling; /* first child, next sibling: trie nodes, -1 none */
    int token;          /* first token whose bytes end here, -1 none (more in next_same) */
    uint8_t byte;
} trie_node;

struct da_token_mask {
    trie_node *nodes;
    int n_nodes, V, max_len;
    int *next_same;   /* (V): the next token with the same bytes, -1 none */
    int *end_ids, n_end;
    da_json_state *states; /* (max_len + 1): the walk's state per depth */
};

static int child_of(da_token_mask *m, int parent, uint8_t b, int create) {
    int prev = -1;
    for (int c = m->nodes[parent].child; c >= 0; prev = c, c = m->nodes[c].sibling)
        if (m->nodes[c].byte == b) return c;
    if (!create) return -1;
    int c = m->n_nodes++;
    m->nodes[c] = (trie_node){.child = -1, .sibling = -1, .token = -1, .byte = b};
    if (prev < 0) m->nodes[parent].child = c;
    else m->nodes[prev].sibling = c;
    return c;
}

da_status da_token_mask_build(da_token_mask **out, const uint8_t *const *bytes, const int *len, int V,
                              const int *end_ids, int n_end) {
    *out = NULL;
    long total = 1;
    int max_len = 0;
    for (int i = 0; i < V; i++) {
        if (len[i] < 0) return da_errorf("token %d: negative length", i);
        total += len[i];
        max_len = len[i] > max_len ? len[i] : max_len;
    }
    da_token_mask *m = calloc(1, sizeof *m);
    if (m) {
        m->nodes = malloc((size_t)total * sizeof *m->nodes);
        m->next_same = malloc((size_t)(V > 0 ? V : 1) * sizeof(int));
        m->end_ids = malloc((size_t)(n_end > 0 ? n_end : 1) * sizeof(int));
        m->states = malloc((size_t)(max_len + 1) * sizeof(da_json_state));
    }
    if (!m || !m->nodes || !m->next_same || !m->end_ids || !m->states) {
        da_token_mask_free(m);
        return da_errorf("the token mask of %d tokens: out of memory", V);
    }
    m->V = V, m->max_len = max_len, m->n_end = n_end;
    if (n_end) memcpy(m->end_ids, end_ids, (size_t)n_end * sizeof(int));
    m->n_nodes = 1;
    m->nodes[0] = (trie_node){.child = -1, .sibling = -1, .token = -1};
    for (int i = 0; i < V; i++) {
        m->next_same[i] = -1;
        if (!len[i]) continue;
        int at = 0;
        for (int k = 0; k < len[i]; k++) at = child_of(m, at, bytes[i][k], 1);
        m->next_same[i] = m->nodes[at].token;
        m->nodes[at].token = i;
    }
    *out = m;
    return da_ok();
}

void da_token_mask_free(da_token_mask *m) {
    if (!m) return;
    free(m->nodes);
    free(m->next_same);
    free(m->end_ids);
    free(m->states);
    free(m);
}

/* Only the frames in use: a state is mostly empty stack. */
static void state_copy(da_json_state *dst, const da_json_state *src) {
    dst->n_alts = src->n_alts;
    for (int i = 0; i < src->n_alts; i++) {
        const da_json_alt *a = &src->alt[i];
        memcpy(&dst->alt[i], a, offsetof(da_json_alt, f) + a->depth * sizeof a->f[0]);
    }
}

typedef struct {
    const da_token_mask *m;
    const da_json_schema *s;
    int budget; /* bytes the answer may still need after a token: tokens_left - 1, or -1 for none */
    uint8_t *allowed;
    int n_allowed;
} walk;

static void visit(walk *w, int node, int depth) {
    const da_token_mask *m = w->m;
    for (int c = m->nodes[node].child; c >= 0; c = m->nodes[c].sibling) {
        da_json_state *st = &m->states[depth + 1];
        state_copy(st, &m->states[depth]);
        if (!da_json_feed(w->s, st, m->nodes[c].byte)) continue;
        int left = da_json_min_left(w->s, st);
        if (left < 0) continue;
        if (m->nodes[c].token >= 0 && (w->budget < 0 || left <= w->budget))
            for (int t = m->nodes[c].token; t >= 0; t = m->next_same[t]) w->allowed[t] = 1, w->n_allowed++;
        /* a byte shortens the answer by at most one: deeper tokens cannot fit if this one is too far */
        if (w->budget >= 0 && left > w->budget + m->max_len) continue;
        if (m->nodes[c].child >= 0) visit(w, c, depth + 1);
    }
}

int da_token_mask_allowed(const da_token_mask *m, const da_json_schema *s, const da_json_state *st,
                          int tokens_left, uint8_t *allowed) {
    memset(allowed, 0, (size_t)m->V);
    walk w = {.m = m, .s = s, .budget = tokens_left > 0 ? tokens_left - 1 : -1, .allowed = allowed};
    state_copy(&m->states[0], st);
    visit(&w, 0, 0);
    if (da_json_done(s, st))
        for (int i = 0; i < m->n_end; i++)
            if (m->end_ids[i] >= 0 && m->end_ids[i] < m->V && !allowed[m->end_ids[i]]) allowed[m->end_ids[i]] = 1, w.n_allowed++;
    return w.n_allowed;
}
