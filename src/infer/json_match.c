/* The byte-level matcher of constrained JSON: one byte at a time, each
 * alternative a stack of frames, one per value being read (json_schema.h).
 *
 * A value that ends without a closing byte (a number, a literal such as
 * true or an enum's 12) is popped when a byte cannot extend it, and that
 * byte then goes to the value around it. da_json_min_left is exact (the
 * fewest bytes to a whole answer), so a token budget can always be met:
 * each frame adds what it still needs once the frame above it is done. */
#include <string.h>

#include "infer/json_schema.h"
#include "infer/json_schema_node.h"

enum { K_VALUE, K_OBJ, K_ARR, K_STR, K_NUM, K_LIT };
/* object phases */
enum { OBJ_OPEN, OBJ_KEY, OBJ_COLON, OBJ_VALUE, OBJ_AFTER, OBJ_COMMA };
/* array phases */
enum { ARR_OPEN, ARR_VALUE, ARR_AFTER, ARR_COMMA };
/* string phases; the frame's `set` holds: bits 0-7 bytes a UTF-8 sequence still needs, 8-15 and 16-23
 * the range of its next byte, 24-39 a \u escape's value so far */
enum { STR_TEXT, STR_ESC, STR_HEX0, STR_UTF8 = 8, STR_KEY = 0x80 /* or-ed: a free key, then ':' */ };

static int is_ws(uint8_t b) { return b == ' ' || b == '\n' || b == '\t' || b == '\r'; }

static da_json_frame *top(da_json_alt *a) { return &a->f[a->depth - 1]; }

static int push(da_json_alt *a, int kind, int node) {
    if (a->depth == DA_JSON_MAX_DEPTH) return 0;
    a->f[a->depth++] = (da_json_frame){.node = (uint16_t)node, .kind = (uint8_t)kind};
    return 1;
}

static uint64_t all_bits(int n) { return n >= 64 ? ~0ull : (1ull << n) - 1; }

/* The top frame's value is whole: pop it and move its parent on. */
static void pop_done(da_json_alt *a) {
    a->depth--;
    a->num_len = 0;
    if (!a->depth) return;
    da_json_frame *p = top(a);
    if (p->kind == K_OBJ) p->phase = p->phase == OBJ_KEY ? OBJ_COLON : OBJ_AFTER;
    else if (p->kind == K_ARR) p->count++, p->phase = ARR_AFTER;
}

/* Literal candidates (of lits[at ..]) whose byte at pos is b. */
static uint64_t lit_next(const da_json_schema *s, int at, uint64_t cand, uint32_t pos, uint8_t b) {
    uint64_t out = 0;
    for (uint64_t m = cand; m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        const js_lit *l = &s->lits[at + i];
        if ((int)pos < l->len && (uint8_t)l->text[pos] == b) out |= 1ull << i;
    }
    return out;
}

static int lit_whole(const da_json_schema *s, int at, uint64_t cand, uint32_t pos) {
    for (uint64_t m = cand; m; m &= m - 1)
        if (s->lits[at + __builtin_ctzll(m)].len == (int)pos) return 1;
    return 0;
}

static int lit_longer(const da_json_schema *s, int at, uint64_t cand, uint32_t pos) {
    for (uint64_t m = cand; m; m &= m - 1)
        if (s->lits[at + __builtin_ctzll(m)].len > (int)pos) return 1;
    return 0;
}

/* The literal list of a K_LIT frame: the node's enum, or true/false, or null. */
static int lit_at(const da_json_schema *s, const da_json_frame *f) {
    if (f->phase == 1) return s->lit_true_false;
    if (f->phase == 2) return s->lit_null;
    return js_node_at(s, f->node)->lits_at;
}

/* The properties an object may still write. */
static uint64_t keys_left(const js_node *n, uint64_t seen) { return all_bits(n->n_props) & ~seen; }

/* The object can take another key. */
static int obj_more(const js_node *n, uint64_t seen) { return n->n_props ? keys_left(n, seen) != 0 : n->additional >= 0; }

/* Opens a key: a listed property's literal, or a free string. */
static int obj_key(da_json_alt *a, const js_node *n, da_json_frame *f) {
    if (!obj_more(n, f->set)) return 0;
    if (n->n_props) {
        f->phase = OBJ_KEY, f->aux = keys_left(n, f->set), f->count = 1; /* the opening quote matched */
        return 1;
    }
    f->phase = OBJ_KEY;
    if (!push(a, K_STR, n->additional)) return 0;
    top(a)->phase = STR_KEY;
    return 1;
}

static int feed_string(da_json_alt *a, da_json_frame *f, const js_node *n, uint8_t b) {
    int key = f->phase & STR_KEY, phase = f->phase & ~STR_KEY;
    int max = key ? -1 : n->max_len, min = key ? 0 : n->min_len;
    if (phase == STR_TEXT) {
        if (b == '"') {
            if ((int)f->count < min) return 0;
            pop_done(a);
            return 1;
        }
        if (b < 0x20 || (max >= 0 && (int)f->count >= max)) return 0;
        if (b == '\\') {
            f->phase = (uint8_t)(STR_ESC | key);
            return 1;
        }
        if (b < 0x80) {
            f->count++;
            return 1;
        }
        int need, lo = 0x80, hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF) need = 1;
        else if (b >= 0xE0 && b <= 0xEF) need = 2, lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
        else if (b >= 0xF0 && b <= 0xF4) need = 3, lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
        else return 0;
        f->count++;
        f->set = (uint64_t)need | (uint64_t)lo << 8 | (uint64_t)hi << 16;
        f->phase = (uint8_t)(STR_UTF8 | key);
        return 1;
    }
    if (phase == STR_UTF8) {
        int need = (int)(f->set & 0xFF), lo = (int)(f->set >> 8 & 0xFF), hi = (int)(f->set >> 16 & 0xFF);
        if (b < lo || b > hi) return 0;
        f->set = (uint64_t)(need - 1) | 0x80ull << 8 | 0xBFull << 16;
        if (need == 1) f->phase = (uint8_t)(STR_TEXT | key);
        return 1;
    }
    if (phase == STR_ESC) {
        if (b == 'u') {
            f->phase = (uint8_t)(STR_HEX0 | key), f->set = 0;
            return 1;
        }
        if (!strchr("\"\\/bfnrt", b) || !b) return 0;
        f->count++, f->phase = (uint8_t)(STR_TEXT | key);
        return 1;
    }
    /* \u and 4 hex digits: no surrogates, so every escape is one code point */
    int digits = phase - STR_HEX0, v;
    if (b >= '0' && b <= '9') v = b - '0';
    else if ((b | 0x20) >= 'a' && (b | 0x20) <= 'f') v = (b | 0x20) - 'a' + 10;
    else return 0;
    uint64_t cp = (f->set >> 24 & 0xFFFF) * 16 + (uint64_t)v;
    if (digits == 1 && (f->set >> 24 & 0xF) == 0xD && v >= 8) return 0;
    if (digits == 3) {
        f->count++, f->phase = (uint8_t)(STR_TEXT | key), f->set = 0;
        return 1;
    }
    f->set = cp << 24, f->phase = (uint8_t)((STR_HEX0 + digits + 1) | key);
    return 1;
}

/* Starts a value of node n at byte b (not whitespace) in the top frame (a K_VALUE). */
static int start_value(da_json_alt *a, const js_node *n, uint8_t b) {
    da_json_frame *f = top(a);
    if (n->is_enum) {
        if (!n->n_lits) return 0;
        f->kind = K_LIT, f->phase = 0, f->set = all_bits(n->n_lits), f->count = 0;
        return -1; /* read b as the literal's first byte */
    }
    if (b == '{' && (n->types & JT_OBJ)) {
        f->kind = K_OBJ, f->phase = OBJ_OPEN, f->set = 0, f->count = 0;
        return 1;
    }
    if (b == '[' && (n->types & JT_ARR)) {
        if (n->max_items >= 0 && n->max_items < n->min_items) return 0;
        f->kind = K_ARR, f->phase = ARR_OPEN, f->count = 0;
        return 1;
    }
    if (b == '"' && (n->types & JT_STR)) {
        f->kind = K_STR, f->phase = STR_TEXT, f->count = 0, f->set = 0;
        return 1;
    }
    if ((b == '-' || (b >= '0' && b <= '9')) && (n->types & (JT_INT | JT_NUM))) {
        f->kind = K_NUM, a->num_len = 0;
        return -1;
    }
    if ((b == 't' || b == 'f') && (n->types & JT_BOOL)) {
        f->kind = K_LIT, f->phase = 1, f->set = 3, f->count = 0;
        return -1;
    }
    if (b == 'n' && (n->types & JT_NULL)) {
        f->kind = K_LIT, f->phase = 2, f->set = 1, f->count = 0;
        return -1;
    }
    return 0;
}

static int feed_obj(const da_json_schema *s, da_json_alt *a, da_json_frame *f, const js_node *n, uint8_t b) {
    switch (f->phase) {
    case OBJ_OPEN:
    case OBJ_AFTER:
        if (b == '}') {
            if ((n->required & ~f->set) != 0) return 0;
            pop_done(a);
            return 1;
        }
        if (f->phase == OBJ_AFTER) {
            if (b != ',' || !obj_more(n, f->set)) return 0;
            f->phase = OBJ_COMMA;
            return 1;
        }
        return b == '"' && obj_key(a, n, f);
    case OBJ_COMMA: return b == '"' && obj_key(a, n, f);
    case OBJ_KEY: {
        uint64_t next = lit_next(s, n->props_at, f->aux, f->count, b);
        if (!next) return 0;
        f->aux = next, f->count++;
        if (lit_whole(s, n->props_at, next, f->count)) { /* the closing quote: one property */
            int p = __builtin_ctzll(next);
            f->set |= 1ull << p, f->count = (uint32_t)p, f->phase = OBJ_COLON;
        }
        return 1;
    }
    case OBJ_COLON: {
        if (b != ':') return 0;
        int v = n->n_props ? s->lits[n->props_at + (int)f->count].node : n->additional;
        f->phase = OBJ_VALUE;
        return push(a, K_VALUE, v);
    }
    }
    return 0;
}

static int feed_arr(da_json_alt *a, da_json_frame *f, const js_node *n, uint8_t b) {
    if (f->phase == ARR_OPEN && b == ']') {
        if (n->min_items > 0) return 0;
        pop_done(a);
        return 1;
    }
    if (f->phase == ARR_AFTER) {
        if (b == ']') {
            if ((int)f->count < n->min_items) return 0;
            pop_done(a);
            return 1;
        }
        if (b != ',' || (n->max_items >= 0 && (int)f->count >= n->max_items)) return 0;
        f->phase = ARR_COMMA;
        return 1;
    }
    if (n->max_items >= 0 && (int)f->count >= n->max_items) return 0;
    f->phase = ARR_VALUE;
    return push(a, K_VALUE, n->items) ? -1 : 0; /* the item reads b */
}

/* One byte into one alternative; a fork (anyOf) appends alternatives to out. 0: dead. */
static int feed_alt(const da_json_schema *s, da_json_alt *a, uint8_t b, da_json_state *out);

static int fork_any_of(const da_json_schema *s, da_json_alt *a, const js_node *n, uint8_t b, da_json_state *out) {
    int alive = 0;
    for (int i = 0; i < n->any_of; i++) {
        da_json_alt copy = *a;
        top(&copy)->node = (uint16_t)s->kids[n->any_of_at + i];
        if (i == n->any_of - 1) { /* the last branch continues in a itself */
            *a = copy;
            alive |= feed_alt(s, a, b, out);
        } else if (feed_alt(s, &copy, b, out) && out->n_alts < DA_JSON_MAX_ALTS) {
            out->alt[out->n_alts++] = copy;
        }
    }
    return alive;
}

static int feed_alt(const da_json_schema *s, da_json_alt *a, uint8_t b, da_json_state *out) {
    for (;;) {
        if (!a->depth) return 0; /* nothing follows a whole answer */
        da_json_frame *f = top(a);
        const js_node *n = js_node_at(s, f->node);
        int ws_gap = f->kind == K_VALUE || (f->kind == K_OBJ && f->phase != OBJ_KEY) || (f->kind == K_ARR && f->phase != ARR_VALUE);
        if (ws_gap && is_ws(b)) {
            if (a->ws >= DA_JSON_MAX_WS) return 0;
            a->ws++;
            return 1;
        }
        int r;
        switch (f->kind) {
        case K_VALUE:
            if (n->any_of) return fork_any_of(s, a, n, b, out);
            r = start_value(a, n, b);
            break;
        case K_OBJ: r = feed_obj(s, a, f, n, b); break;
        case K_ARR: r = feed_arr(a, f, n, b); break;
        case K_STR: r = feed_string(a, f, n, b); break;
        case K_NUM:
            a->num[a->num_len] = (char)b;
            if (a->num_len + 1 < DA_JSON_NUM_TEXT && js_num_min_left(n, a->num, a->num_len + 1) >= 0) {
                a->num_len++;
                r = 1;
            } else if (js_num_complete(n, a->num, a->num_len)) {
                pop_done(a);
                r = -1;
            } else r = 0;
            break;
        default: { /* K_LIT */
            int at = lit_at(s, f);
            uint64_t next = lit_next(s, at, f->set, f->count, b);
            if (next) {
                f->set = next, f->count++;
                if (!lit_longer(s, at, next, f->count)) pop_done(a);
                r = 1;
            } else if (lit_whole(s, at, f->set, f->count)) {
                pop_done(a);
                r = -1;
            } else r = 0;
        }
        }
        if (r >= 0) {
            if (r) a->ws = 0;
            return r;
        }
        /* r < 0: b is read again by the frame now on top */
    }
}

static int same_alt(const da_json_alt *x, const da_json_alt *y) {
    return x->depth == y->depth && x->ws == y->ws && x->num_len == y->num_len &&
           !memcmp(x->num, y->num, x->num_len) && !memcmp(x->f, y->f, x->depth * sizeof x->f[0]);
}

void da_json_start(const da_json_schema *s, da_json_state *st) {
    st->n_alts = 1;
    memset(&st->alt[0], 0, sizeof st->alt[0]);
    st->alt[0].depth = 1;
    st->alt[0].f[0] = (da_json_frame){.node = (uint16_t)s->root, .kind = K_VALUE};
}

int da_json_feed(const da_json_schema *s, da_json_state *st, uint8_t byte) {
    da_json_state forks;
    forks.n_alts = 0;
    int n = 0;
    if (st->n_alts == 1) { /* the usual case: in place, no copy of the alternative (a dead one is dropped anyway) */
        n = feed_alt(s, &st->alt[0], byte, &forks) ? 1 : 0;
    } else {
        for (int i = 0; i < st->n_alts; i++) {
            da_json_alt a = st->alt[i];
            if (feed_alt(s, &a, byte, &forks)) st->alt[n++] = a;
        }
    }
    for (int i = 0; i < forks.n_alts && n < DA_JSON_MAX_ALTS; i++) st->alt[n++] = forks.alt[i];
    /* alternatives that reached the same state are one */
    int m = 0;
    for (int i = 0; i < n; i++) {
        int dup = 0;
        for (int j = 0; j < m && !dup; j++) dup = same_alt(&st->alt[i], &st->alt[j]);
        if (!dup) {
            if (m != i) st->alt[m] = st->alt[i];
            m++;
        }
    }
    st->n_alts = m;
    return m > 0;
}

int da_json_feed_bytes(const da_json_schema *s, da_json_state *st, const uint8_t *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!da_json_feed(s, st, b[i])) return 0;
    return 1;
}

/* An alternative is a whole answer: nothing left, or only a number or literal that may end here. */
static int alt_done(const da_json_schema *s, const da_json_alt *a) {
    if (!a->depth) return 1;
    if (a->depth > 1) return 0;
    const da_json_frame *f = &a->f[0];
    if (f->kind == K_NUM) return js_num_complete(js_node_at(s, f->node), a->num, a->num_len);
    if (f->kind == K_LIT) return lit_whole(s, lit_at(s, f), f->set, f->count);
    return 0;
}

int da_json_done(const da_json_schema *s, const da_json_state *st) {
    for (int i = 0; i < st->n_alts; i++)
        if (alt_done(s, &st->alt[i])) return 1;
    return 0;
}

int da_json_closed(const da_json_schema *s, const da_json_state *st) {
    if (!da_json_done(s, st)) return 0;
    for (int b = 0; b < 256; b++) {
        da_json_state copy = *st;
        if (da_json_feed(s, &copy, (uint8_t)b)) return 0;
    }
    return 1;
}

/* Bytes an object needs after a value, with `seen` written: the required ones left, then '}'. */
static long obj_rest(const da_json_schema *s, const js_node *n, uint64_t seen) {
    long cost = 1;
    for (int i = 0; i < n->n_props; i++)
        if ((n->required & ~seen) >> i & 1) {
            const js_lit *p = &s->lits[n->props_at + i];
            cost += 1 + p->len + 1 + js_node_at(s, p->node)->min_bytes;
        }
    return cost;
}

/* Bytes a new key costs from its opening quote's place, value and rest of the object included. */
static long obj_new_key(const da_json_schema *s, const js_node *n, uint64_t seen) {
    if (!n->n_props) return n->additional < 0 ? JS_INF : 2 + 1 + js_node_at(s, n->additional)->min_bytes + 1;
    long best = JS_INF;
    for (uint64_t m = keys_left(n, seen); m; m &= m - 1) {
        int i = __builtin_ctzll(m);
        const js_lit *p = &s->lits[n->props_at + i];
        long c = p->len + 1 + js_node_at(s, p->node)->min_bytes + obj_rest(s, n, seen | 1ull << i);
        best = c < best ? c : best;
    }
    return best;
}

static long arr_rest(const js_node *n, const da_json_schema *s, int count) {
    long left = n->min_items - count;
    return left <= 0 ? 1 : left * (1 + js_node_at(s, n->items)->min_bytes) + 1;
}

/* What one frame still needs once the frame above it (if any) is done. */
static long frame_left(const da_json_schema *s, const da_json_alt *a, const da_json_frame *f) {
    const js_node *n = js_node_at(s, f->node);
    switch (f->kind) {
    case K_VALUE: return n->min_bytes;
    case K_NUM: {
        int left = js_num_min_left(n, a->num, a->num_len);
        return left < 0 ? JS_INF : left;
    }
    case K_LIT: {
        int at = lit_at(s, f);
        long best = JS_INF;
        for (uint64_t m = f->set; m; m &= m - 1) {
            long c = s->lits[at + __builtin_ctzll(m)].len - (long)f->count;
            best = c < best ? c : best;
        }
        return best;
    }
    case K_STR: {
        int key = f->phase & STR_KEY, phase = f->phase & ~STR_KEY;
        long pending = phase == STR_ESC ? 1 : phase == STR_UTF8 ? (long)(f->set & 0xFF)
                     : phase >= STR_HEX0 && phase < STR_UTF8 ? 4 - (phase - STR_HEX0) : 0;
        long count = (long)f->count + (phase == STR_ESC || (phase >= STR_HEX0 && phase < STR_UTF8));
        long min = key ? 0 : n->min_len;
        return pending + (min > count ? min - count : 0) + 1;
    }
    case K_ARR:
        if (f->phase == ARR_OPEN) return n->min_items > 0 ? arr_rest(n, s, 0) - 1 : 1;
        if (f->phase == ARR_COMMA) return js_node_at(s, n->items)->min_bytes + arr_rest(n, s, (int)f->count + 1);
        if (f->phase == ARR_VALUE) return arr_rest(n, s, (int)f->count + 1);
        return arr_rest(n, s, (int)f->count);
    default: /* K_OBJ */
        switch (f->phase) {
        case OBJ_OPEN: return (n->required ? obj_rest(s, n, f->set) - 1 : 1);
        case OBJ_COMMA: return obj_new_key(s, n, f->set);
        case OBJ_KEY:
            if (!n->n_props) /* a free key is a string frame above: then ':', the value and '}' */
                return 1 + js_node_at(s, n->additional)->min_bytes + obj_rest(s, n, f->set);
            {
                long best = JS_INF;
                for (uint64_t m = f->aux; m; m &= m - 1) {
                    int i = __builtin_ctzll(m);
                    const js_lit *p = &s->lits[n->props_at + i];
                    long c = p->len - (long)f->count + 1 + js_node_at(s, p->node)->min_bytes + obj_rest(s, n, f->set | 1ull << i);
                    best = c < best ? c : best;
                }
                return best;
            }
        case OBJ_COLON: {
            int v = n->n_props ? s->lits[n->props_at + (int)f->count].node : n->additional;
            return 1 + js_node_at(s, v)->min_bytes + obj_rest(s, n, f->set);
        }
        default: return obj_rest(s, n, f->set); /* OBJ_VALUE, OBJ_AFTER */
        }
    }
}

int da_json_min_left(const da_json_schema *s, const da_json_state *st) {
    long best = JS_INF;
    for (int i = 0; i < st->n_alts; i++) {
        const da_json_alt *a = &st->alt[i];
        long total = 0;
        for (int d = a->depth - 1; d >= 0 && total < JS_INF; d--) total += frame_left(s, a, &a->f[d]);
        best = total < best ? total : best;
    }
    return best >= JS_INF ? -1 : (int)best;
}

int da_json_in_string(const da_json_schema *s, const da_json_state *st, int *count, int *min, int *max) {
    if (st->n_alts != 1 || !st->alt[0].depth) return 0;
    const da_json_frame *f = &st->alt[0].f[st->alt[0].depth - 1];
    if (f->kind != K_STR || (f->phase & ~STR_KEY) != STR_TEXT) return 0;
    const js_node *n = js_node_at(s, f->node);
    int key = f->phase & STR_KEY;
    *count = (int)f->count, *min = key ? 0 : n->min_len, *max = key ? -1 : n->max_len;
    return 1;
}
