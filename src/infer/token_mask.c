/* The tokens a constrained answer may take next: the vocabulary's byte
 * strings in a trie, walked depth first with the matcher's state, so a
 * prefix shared by many tokens is matched once and a dead prefix prunes
 * every token under it.
 *
 * Inside a string almost every token is allowed, and the walk would visit
 * the whole vocabulary: there, the plain tokens (whole UTF-8 characters,
 * none a quote, a backslash or a control character) only add their
 * characters to the string's count, so they are decided by arithmetic, and
 * the walk covers the other tokens only, through a second trie. */
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
    trie_node *nodes;   /* two tries: every token from node 0, the tokens that are not plain from `other` */
    int n_nodes, other, V, max_len;
    int *chars;         /* (V): a plain token's characters; -1: not plain (or never allowed) */
    int *by_chars;      /* (n_plain): the plain tokens, fewest characters first */
    int *chars_at;      /* (max_chars + 2): by_chars[chars_at[c] ..] have c or more characters */
    uint8_t *plain;     /* (V): 1 for the plain tokens, the mask of a string that may take them all */
    int n_plain, max_chars;
    int *next_same;   /* (V): the next token with the same bytes in the first trie, -1 none */
    int *other_next;  /* (V): the same in the second trie */
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

/* The characters of a token that a string may hold as it is, or -1: its bytes are whole UTF-8 characters
 * (the matcher's rules: no overlong forms, no surrogates) and none is '"', '\\' or below 0x20. */
static int plain_chars(const uint8_t *b, int n) {
    int chars = 0;
    for (int i = 0; i < n; chars++) {
        uint8_t c = b[i];
        if (c < 0x20 || c == '"' || c == '\\') return -1;
        int need, lo = 0x80, hi = 0xBF;
        if (c < 0x80) need = 0;
        else if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) need = 2, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
        else if (c >= 0xF0 && c <= 0xF4) need = 3, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
        else return -1;
        if (i + need >= n) return -1;
        for (int k = 1; k <= need; k++, lo = 0x80, hi = 0xBF)
            if (b[i + k] < lo || b[i + k] > hi) return -1;
        i += need + 1;
    }
    return n ? chars : -1;
}

static void insert(da_token_mask *m, int root, const uint8_t *b, int n, int token) {
    int at = root;
    for (int k = 0; k < n; k++) at = child_of(m, at, b[k], 1);
    m->next_same[token] = m->nodes[at].token;
    m->nodes[at].token = token;
}

/* Counting sort of the plain tokens by characters (at most one a byte, so at most max_len). */
static void sort_plain(da_token_mask *m) {
    memset(m->chars_at, 0, (size_t)(m->max_len + 2) * sizeof(int));
    m->max_chars = 0;
    for (int t = 0; t < m->V; t++)
        if (m->chars[t] >= 0) {
            m->chars_at[m->chars[t] + 1]++, m->plain[t] = 1, m->n_plain++;
            m->max_chars = m->chars[t] > m->max_chars ? m->chars[t] : m->max_chars;
        }
    for (int c = 0; c <= m->max_len; c++) m->chars_at[c + 1] += m->chars_at[c];
    for (int t = 0; t < m->V; t++)
        if (m->chars[t] >= 0) m->by_chars[m->chars_at[m->chars[t]]++] = t;
    for (int c = m->max_len; c > 0; c--) m->chars_at[c] = m->chars_at[c - 1];
    m->chars_at[0] = 0;
}

da_status da_token_mask_build(da_token_mask **out, const uint8_t *const *bytes, const int *len, int V,
                              const int *end_ids, int n_end) {
    *out = NULL;
    long total = 2;
    int max_len = 0;
    for (int i = 0; i < V; i++) {
        if (len[i] < 0) return da_errorf("token %d: negative length", i);
        total += 2L * len[i];
        max_len = len[i] > max_len ? len[i] : max_len;
    }
    da_token_mask *m = calloc(1, sizeof *m);
    if (m) {
        m->nodes = malloc((size_t)total * sizeof *m->nodes);
        m->next_same = malloc((size_t)(V > 0 ? V : 1) * sizeof(int));
        m->other_next = malloc((size_t)(V > 0 ? V : 1) * sizeof(int));
        m->chars = malloc((size_t)(V > 0 ? V : 1) * sizeof(int));
        m->by_chars = malloc((size_t)(V > 0 ? V : 1) * sizeof(int));
        m->chars_at = malloc((size_t)(max_len + 2) * sizeof(int));
        m->plain = calloc((size_t)(V > 0 ? V : 1), 1);
        m->end_ids = malloc((size_t)(n_end > 0 ? n_end : 1) * sizeof(int));
        m->states = malloc((size_t)(max_len + 1) * sizeof(da_json_state));
    }
    if (!m || !m->nodes || !m->next_same || !m->other_next || !m->chars || !m->by_chars || !m->chars_at || !m->plain || !m->end_ids || !m->states) {
        da_token_mask_free(m);
        return da_errorf("the token mask of %d tokens: out of memory", V);
    }
    m->V = V, m->max_len = max_len, m->n_end = n_end;
    if (n_end) memcpy(m->end_ids, end_ids, (size_t)n_end * sizeof(int));
    m->n_nodes = 2, m->other = 1;
    m->nodes[0] = m->nodes[1] = (trie_node){.child = -1, .sibling = -1, .token = -1};
    for (int i = 0; i < V; i++) {
        m->next_same[i] = m->other_next[i] = -1;
        m->chars[i] = len[i] ? plain_chars(bytes[i], len[i]) : -1;
        if (!len[i]) continue;
        insert(m, 0, bytes[i], len[i], i);
        if (m->chars[i] < 0) { /* the second trie links its tokens through other_next */
            int at = m->other;
            for (int k = 0; k < len[i]; k++) at = child_of(m, at, bytes[i][k], 1);
            m->other_next[i] = m->nodes[at].token;
            m->nodes[at].token = i;
        }
    }
    sort_plain(m);
    *out = m;
    return da_ok();
}

void da_token_mask_free(da_token_mask *m) {
    if (!m) return;
    free(m->nodes);
    free(m->next_same);
    free(m->other_next);
    free(m->chars);
    free(m->by_chars);
    free(m->chars_at);
    free(m->plain);
    free(m->end_ids);
    free(m->states);
    free(m);
}

/* Only the frames in use: a state is mostly empty stack. Fixed-size copies (the header, then frame by
 * frame) compile to plain moves; one memcpy of the variable length was a string copy's startup a trie node. */
static void state_copy(da_json_state *dst, const da_json_state *src) {
    dst->n_alts = src->n_alts;
    for (int i = 0; i < src->n_alts; i++) {
        const da_json_alt *a = &src->alt[i];
        da_json_alt *d = &dst->alt[i];
        memcpy(d, a, offsetof(da_json_alt, f));
        for (int k = 0; k < a->depth; k++) d->f[k] = a->f[k];
    }
}

typedef struct {
    const da_token_mask *m;
    const int *next; /* the trie's token links: next_same or other_next */
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
            for (int t = m->nodes[c].token; t >= 0; t = w->next[t]) w->allowed[t] = 1, w->n_allowed++;
        /* a byte shortens the answer by at most one: deeper tokens cannot fit if this one is too far */
        if (w->budget >= 0 && left > w->budget + m->max_len) continue;
        if (m->nodes[c].child >= 0) visit(w, c, depth + 1);
    }
}

/* The plain tokens inside a string, by arithmetic: a token of c characters is allowed when the string may
 * grow by c, and the answer then still fits. 0 when the state is not simply inside a string. */
static int plain_in_string(walk *w, const da_json_state *st) {
    int count, min, max;
    if (!da_json_in_string(w->s, st, &count, &min, &max)) return 0;
    const da_token_mask *m = w->m;
    const int left = da_json_min_left(w->s, st), need = min > count ? min - count : 0;
    /* the bytes left after c characters, left - need + max(need - c, 0), fall as c grows: the allowed
     * counts are one range [lo, hi], and the tokens sorted by count are one run */
    int lo = 1, hi = m->max_chars;
    if (max >= 0 && max - count < hi) hi = max - count;
    if (w->budget >= 0) {
        if (left - need > w->budget) return 1;
        int short_by = need - (w->budget - (left - need)); /* the fewest characters that fit: need - slack */
        if (short_by > lo) lo = short_by;
    }
    if (lo > hi) return 1;
    if (lo <= 1 && hi >= m->max_chars) { /* all of them: the mask starts as the plain tokens' */
        memcpy(w->allowed, m->plain, (size_t)m->V);
        w->n_allowed += m->n_plain;
        return 1;
    }
    for (int i = m->chars_at[lo]; i < m->chars_at[hi + 1]; i++) w->allowed[m->by_chars[i]] = 1, w->n_allowed++;
    return 1;
}

int da_token_mask_allowed(const da_token_mask *m, const da_json_schema *s, const da_json_state *st,
                          int tokens_left, uint8_t *allowed) {
    memset(allowed, 0, (size_t)m->V);
    walk w = {.m = m, .next = m->next_same, .s = s, .budget = tokens_left > 0 ? tokens_left - 1 : -1, .allowed = allowed};
    state_copy(&m->states[0], st);
    if (plain_in_string(&w, st)) {
        w.next = m->other_next;
        visit(&w, m->other, 0);
    } else {
        visit(&w, 0, 0);
    }
    if (da_json_done(s, st))
        for (int i = 0; i < m->n_end; i++)
            if (m->end_ids[i] >= 0 && m->end_ids[i] < m->V && !allowed[m->end_ids[i]]) allowed[m->end_ids[i]] = 1, w.n_allowed++;
    return w.n_allowed;
}
