/* JSON Schema (a subset) to the nodes the matcher reads.
 *
 * The subset: type (a name or a list), properties, required,
 * additionalProperties (false, true, or a schema when there are no
 * properties), enum, const, minLength, maxLength, minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum, items (one schema), minItems,
 * maxItems, anyOf, $ref to "#", "#/$defs/NAME" or "#/definitions/NAME",
 * and the annotations that do not change what is valid (title,
 * description, default, examples, ...). Any other keyword is refused by
 * name, so nothing is silently unconstrained.
 *
 * What the decoder writes is a subset of the valid answers: an object with
 * properties holds only those properties (each at most once), a string has
 * no escaped surrogates, and numbers are short (json_number.c). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "infer/json_schema.h"
#include "infer/json_schema_node.h"

typedef struct {
    da_json_schema *s;
    const cJSON *root;
    const char *where;
    char path[256];
    int depth;
    struct { const cJSON *def; int node; } refs[64]; /* $ref targets already given a node */
    int n_refs;
    da_status st;
} compiler;

static const char *const annotations[] = {"title", "description", "default", "examples", "$schema", "$id",
                                          "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
                                          "definitions", NULL};

static int fail(compiler *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(compiler *c, const char *fmt, ...) {
    if (c->st.code) return -1;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->st = da_errorf("%s%s: %s", c->where, c->path, msg);
    return -1;
}

static int grow(void **p, int *cap, int need, size_t elem) {
    if (need <= *cap) return 0;
    int n = *cap ? *cap * 2 : 16;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

static int new_node(compiler *c) {
    da_json_schema *s = c->s;
    if (grow((void **)&s->nodes, &s->cap_nodes, s->n_nodes + 1, sizeof(js_node))) return fail(c, "out of memory");
    js_node *n = &s->nodes[s->n_nodes];
    memset(n, 0, sizeof *n);
    n->ref = -1;
    n->max_len = n->max_items = n->additional = n->items = -1;
    return s->n_nodes++;
}

static int add_lit(compiler *c, const char *text, int len, int node) {
    da_json_schema *s = c->s;
    if (grow((void **)&s->lits, &s->cap_lits, s->n_lits + 1, sizeof(js_lit))) return fail(c, "out of memory");
    char *t = malloc((size_t)len + 1);
    if (!t) return fail(c, "out of memory");
    memcpy(t, text, (size_t)len);
    t[len] = 0;
    s->lits[s->n_lits] = (js_lit){t, len, node};
    return s->n_lits++;
}

static int add_kid(compiler *c, int node) {
    da_json_schema *s = c->s;
    if (grow((void **)&s->kids, &s->cap_kids, s->n_kids + 1, sizeof(int))) return fail(c, "out of memory");
    s->kids[s->n_kids] = node;
    return s->n_kids++;
}

/* A node admitting any JSON value. */
static int any_node(compiler *c) {
    int n = new_node(c);
    if (n >= 0) c->s->nodes[n].types = JT_ALL, c->s->nodes[n].items = c->s->nodes[n].additional = n;
    return n;
}

/* A property: its key as a JSON string (quotes and escapes included) and its value's node. */
static char *key_json(const char *name) {
    cJSON *key = cJSON_CreateString(name);
    char *text = key ? cJSON_PrintUnformatted(key) : NULL;
    cJSON_Delete(key);
    return text;
}

static int add_key(compiler *c, const char *name, int node) {
    char *text = key_json(name);
    if (!text) return fail(c, "out of memory");
    int r = add_lit(c, text, (int)strlen(text), node);
    free(text);
    return r;
}

static int is_annotation(const char *k) {
    for (int i = 0; annotations[i]; i++)
        if (!strcmp(k, annotations[i])) return 1;
    return 0;
}

/* Refuses a keyword of j other than `keep` and the annotations: kw (a keyword that takes the whole schema) beside it. */
static int only_beside(compiler *c, const cJSON *j, const char *kw, const char *keep) {
    for (const cJSON *k = j->child; k; k = k->next)
        if (strcmp(k->string, kw) && (!keep || strcmp(k->string, keep)) && !is_annotation(k->string))
            return fail(c, "%s beside \"%s\" is not supported", kw, k->string);
    return 0;
}

static int compile_node(compiler *c, const cJSON *j);

/* A sub-schema at path + suffix. */
static int compile_at(compiler *c, const cJSON *j, const char *fmt, const char *name) {
    size_t n = strlen(c->path);
    snprintf(c->path + n, sizeof c->path - n, fmt, name);
    int r = compile_node(c, j);
    c->path[n] = 0;
    return r;
}

static unsigned type_bit(const char *t) {
    static const char *const names[] = {"null", "boolean", "integer", "number", "string", "array", "object"};
    for (int i = 0; i < 7; i++)
        if (!strcmp(t, names[i])) return 1u << i;
    return 0;
}

static int parse_type(compiler *c, const cJSON *t, unsigned *types) {
    *types = 0;
    if (cJSON_IsString(t)) {
        *types = type_bit(t->valuestring);
        if (!*types) return fail(c, "type \"%s\" is not a JSON Schema type", t->valuestring);
        return 0;
    }
    if (!cJSON_IsArray(t) || !cJSON_GetArraySize(t)) return fail(c, "type must be a type name or a list of them");
    for (const cJSON *e = t->child; e; e = e->next) {
        unsigned b = cJSON_IsString(e) ? type_bit(e->valuestring) : 0;
        if (!b) return fail(c, "type lists a value that is not a JSON Schema type");
        *types |= b;
    }
    return 0;
}

static int get_count(compiler *c, const cJSON *j, const char *key, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e6 || v->valuedouble != floor(v->valuedouble))
        return fail(c, "%s must be a whole number in [0, 1000000]", key);
    *out = (int)v->valuedouble;
    return 1;
}

static int get_bound(compiler *c, const cJSON *j, const char *key, int *has, double *v, int *excl, int is_excl) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!x) return 0;
    if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble)) return fail(c, "%s must be a finite number", key);
    if (*has) return fail(c, "%s: give one lower and one upper bound each (minimum or exclusiveMinimum)", key);
    *has = 1, *v = x->valuedouble, *excl = is_excl;
    return 0;
}

/* The node of a $ref: "#", "#/$defs/NAME" or "#/definitions/NAME". */
static int compile_ref(compiler *c, const cJSON *ref) {
    if (!cJSON_IsString(ref)) return fail(c, "$ref must be a string");
    const char *r = ref->valuestring;
    const cJSON *target = NULL;
    if (!strcmp(r, "#")) target = c->root;
    else if (!strncmp(r, "#/$defs/", 8)) target = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c->root, "$defs"), r + 8);
    else if (!strncmp(r, "#/definitions/", 14))
        target = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(c->root, "definitions"), r + 14);
    else return fail(c, "$ref \"%s\" is not supported (only \"#\", \"#/$defs/NAME\" and \"#/definitions/NAME\")", r);
    if (!target) return fail(c, "$ref \"%s\" names no definition", r);
    for (int i = 0; i < c->n_refs; i++)
        if (c->refs[i].def == target) return c->refs[i].node;
    if (c->n_refs == (int)(sizeof c->refs / sizeof c->refs[0])) return fail(c, "over 64 $ref targets");
    int placeholder = new_node(c);
    if (placeholder < 0) return -1;
    c->refs[c->n_refs].def = target;
    c->refs[c->n_refs++].node = placeholder;
    int saved = c->depth;
    c->depth = 0; /* a definition's nesting starts anew: recursion is bounded by the matcher's stack */
    int real = compile_at(c, target, "(%s)", r);
    c->depth = saved;
    if (real < 0) return -1;
    c->s->nodes[placeholder].ref = real;
    return placeholder;
}

/* enum / const: the literals' JSON texts, those of the node's types. */
static int compile_lits(compiler *c, js_node *n, int node, const cJSON *en, const cJSON *cn, int typed) {
    const cJSON *list = en ? en->child : cn;
    if (en && (!cJSON_IsArray(en) || !cJSON_GetArraySize(en))) return fail(c, "enum must be a non-empty list");
    if (en && cJSON_GetArraySize(en) > DA_JSON_MAX_SET) return fail(c, "enum has over %d values", DA_JSON_MAX_SET);
    n->lits_at = c->s->n_lits;
    n->is_enum = 1;
    for (const cJSON *v = list; v; v = en ? v->next : NULL) {
        unsigned t = cJSON_IsNull(v) ? JT_NULL : cJSON_IsBool(v) ? JT_BOOL : cJSON_IsString(v) ? JT_STR
                   : cJSON_IsArray(v) ? JT_ARR : cJSON_IsObject(v) ? JT_OBJ : JT_NUM;
        if (t == JT_NUM && v->valuedouble == floor(v->valuedouble) && fabs(v->valuedouble) < 1e15) t |= JT_INT;
        if (typed && !(t & n->types)) continue;
        char *text = cJSON_PrintUnformatted(v);
        if (!text) return fail(c, "out of memory");
        int r = add_lit(c, text, (int)strlen(text), node);
        free(text);
        if (r < 0) return -1;
        n->n_lits++;
    }
    return 0;
}

static int compile_object(compiler *c, int node, const cJSON *j) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(j, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(j, "required");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(j, "additionalProperties");
    if (props && !cJSON_IsObject(props)) return fail(c, "properties must be an object");
    if (req && !cJSON_IsArray(req)) return fail(c, "required must be a list of names");
    int n_props = props ? cJSON_GetArraySize(props) : 0;
    int n_extra = 0; /* required names that properties lacks: any value */
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!cJSON_IsString(r)) return fail(c, "required must be a list of names");
        if (!props || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) n_extra++;
    }
    if (n_props + n_extra > DA_JSON_MAX_SET) return fail(c, "over %d properties", DA_JSON_MAX_SET);
    if (n_props + n_extra > 0 && add && !cJSON_IsBool(add))
        return fail(c, "additionalProperties must be true or false beside properties (a schema is supported alone)");
    /* the values first, then the keys, so that the keys are one run of literals */
    int values[DA_JSON_MAX_SET], k = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next)
        if ((values[k++] = compile_at(c, p, ".properties.%s", p->string)) < 0) return -1;
    int at = c->s->n_lits;
    k = 0;
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next, k++)
        if (add_key(c, p->string, values[k]) < 0) return -1;
    uint64_t required = 0;
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        int found = -1;
        char *text = key_json(r->valuestring);
        if (!text) return fail(c, "out of memory");
        for (int q = 0; q < k && found < 0; q++)
            if (!strcmp(c->s->lits[at + q].text, text)) found = q;
        free(text);
        if (found < 0) { /* required but not described: any value */
            int any = any_node(c);
            if (any < 0 || add_key(c, r->valuestring, any) < 0) return -1;
            found = k++;
        }
        required |= 1ull << found;
    }
    js_node *n = &c->s->nodes[node];
    n->props_at = at, n->n_props = k, n->required = required;
    if (k == 0) {
        if (add && cJSON_IsFalse(add)) n->additional = -1;
        else if (add && cJSON_IsObject(add)) {
            int v = compile_at(c, add, ".additionalProperties%s", "");
            if (v < 0) return -1;
            c->s->nodes[node].additional = v;
        } else {
            int any = any_node(c);
            if (any < 0) return -1;
            c->s->nodes[node].additional = any;
        }
    }
    return c->st.code ? -1 : 0;
}

static int compile_array(compiler *c, int node, const cJSON *j) {
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items");
    int it;
    if (items && !cJSON_IsObject(items) && !cJSON_IsBool(items))
        return fail(c, "items must be one schema (a list of schemas, tuple validation, is not supported)");
    it = items ? compile_at(c, items, ".items%s", "") : any_node(c);
    if (it < 0) return -1;
    js_node *n = &c->s->nodes[node];
    n->items = it;
    if (get_count(c, j, "minItems", &n->min_items) < 0 || get_count(c, j, "maxItems", &n->max_items) < 0) return -1;
    return 0;
}

static const char *const known[] = {"type", "properties", "required", "additionalProperties", "enum", "const",
                                    "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum",
                                    "exclusiveMaximum", "items", "minItems", "maxItems", "anyOf", "$ref", NULL};

static int keyword_known(const char *k) {
    for (int i = 0; known[i]; i++)
        if (!strcmp(k, known[i])) return 1;
    return is_annotation(k);
}

/* The types a schema without "type" admits: those its keywords describe, or every type. */
static unsigned implied_types(const cJSON *j) {
    unsigned t = 0;
    for (const cJSON *k = j->child; k; k = k->next) {
        const char *s = k->string;
        if (!strcmp(s, "properties") || !strcmp(s, "required") || !strcmp(s, "additionalProperties")) t |= JT_OBJ;
        else if (!strcmp(s, "items") || !strcmp(s, "minItems") || !strcmp(s, "maxItems")) t |= JT_ARR;
        else if (!strcmp(s, "minLength") || !strcmp(s, "maxLength")) t |= JT_STR;
        else if (!strncmp(s, "minimum", 7) || !strncmp(s, "maximum", 7) || !strncmp(s, "exclusiveM", 10)) t |= JT_NUM;
    }
    return t ? t : JT_ALL;
}

static int compile_node(compiler *c, const cJSON *j) {
    if (c->st.code) return -1;
    if (++c->depth > DA_JSON_MAX_DEPTH) return fail(c, "nested deeper than %d", DA_JSON_MAX_DEPTH);
    int node = -1;
    if (cJSON_IsBool(j)) { /* true: anything; false: nothing */
        node = new_node(c);
        if (node >= 0 && cJSON_IsTrue(j))
            c->s->nodes[node].types = JT_ALL, c->s->nodes[node].items = c->s->nodes[node].additional = node;
        c->depth--;
        return node;
    }
    if (!cJSON_IsObject(j)) {
        fail(c, "a schema must be an object or a boolean");
        c->depth--;
        return -1;
    }
    for (const cJSON *k = j->child; k; k = k->next)
        if (!keyword_known(k->string)) {
            fail(c, "keyword \"%s\" is not supported (docs/serving.md lists the supported subset)", k->string);
            c->depth--;
            return -1;
        }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(j, "$ref");
    if (ref) {
        if (only_beside(c, j, "$ref", NULL) < 0) {
            c->depth--;
            return -1;
        }
        node = compile_ref(c, ref);
        c->depth--;
        return node;
    }
    node = new_node(c);
    if (node < 0) goto done;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(j, "type");
    unsigned types = 0;
    if (type && parse_type(c, type, &types) < 0) goto done;
    c->s->nodes[node].types = type ? types : implied_types(j);
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(j, "anyOf");
    if (any) {
        if (!cJSON_IsArray(any) || !cJSON_GetArraySize(any) || cJSON_GetArraySize(any) > DA_JSON_MAX_ALTS) {
            fail(c, "anyOf must be a list of 1 to %d schemas", DA_JSON_MAX_ALTS);
            goto done;
        }
        if (only_beside(c, j, "anyOf", NULL) < 0) goto done;
        int kids[DA_JSON_MAX_ALTS], n = 0;
        for (const cJSON *e = any->child; e; e = e->next) {
            char idx[16];
            snprintf(idx, sizeof idx, "%d", n);
            if ((kids[n++] = compile_at(c, e, ".anyOf[%s]", idx)) < 0) goto done;
        }
        c->s->nodes[node].any_of_at = c->s->n_kids;
        for (int i = 0; i < n; i++)
            if (add_kid(c, kids[i]) < 0) goto done;
        c->s->nodes[node].any_of = n;
        goto done;
    }
    js_node *n = &c->s->nodes[node];
    if (get_count(c, j, "minLength", &n->min_len) < 0 || get_count(c, j, "maxLength", &n->max_len) < 0) goto done;
    if (get_bound(c, j, "minimum", &n->has_lo, &n->lo, &n->lo_excl, 0) < 0 ||
        get_bound(c, j, "exclusiveMinimum", &n->has_lo, &n->lo, &n->lo_excl, 1) < 0 ||
        get_bound(c, j, "maximum", &n->has_hi, &n->hi, &n->hi_excl, 0) < 0 ||
        get_bound(c, j, "exclusiveMaximum", &n->has_hi, &n->hi, &n->hi_excl, 1) < 0)
        goto done;
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(j, "enum"), *cn = cJSON_GetObjectItemCaseSensitive(j, "const");
    if (en || cn) {
        if (only_beside(c, j, en ? "enum" : "const", "type") < 0 || (en && cn && fail(c, "give enum or const, not both")))
            goto done;
        compile_lits(c, n, node, en, cn, type != NULL);
        goto done;
    }
    if ((n->types & JT_OBJ) && compile_object(c, node, j) < 0) goto done;
    if ((c->s->nodes[node].types & JT_ARR) && compile_array(c, node, j) < 0) goto done;
done:
    c->depth--;
    return c->st.code ? -1 : node;
}

/* Fewest bytes of a value of each node: a fixed point, since $refs may recurse. */
static int min_bytes_of(const da_json_schema *s, const js_node *n);

static int obj_min(const da_json_schema *s, const js_node *n) {
    long total = 2, req = 0;
    for (int i = 0; i < n->n_props; i++)
        if (n->required >> i & 1) {
            const js_lit *p = &s->lits[n->props_at + i];
            total += p->len + 1 + js_node_at(s, p->node)->min_bytes;
            req++;
        }
    if (req > 1) total += req - 1;
    return total >= JS_INF ? JS_INF : (int)total;
}

static int min_bytes_of(const da_json_schema *s, const js_node *n) {
    long best = JS_INF;
    if (n->any_of) {
        for (int i = 0; i < n->any_of; i++) {
            int m = js_node_at(s, s->kids[n->any_of_at + i])->min_bytes;
            best = m < best ? m : best;
        }
        return (int)best;
    }
    if (n->is_enum) {
        for (int i = 0; i < n->n_lits; i++) best = s->lits[n->lits_at + i].len < best ? s->lits[n->lits_at + i].len : best;
        return (int)best;
    }
    if (n->types & JT_NULL) best = 4;
    if (n->types & JT_BOOL) best = best < 4 ? best : 4;
    if (n->types & (JT_INT | JT_NUM)) {
        int m = js_num_min_left(n, "", 0);
        if (m >= 0 && m < best) best = m;
    }
    if ((n->types & JT_STR) && (n->max_len < 0 || n->max_len >= n->min_len)) {
        long m = 2 + (long)n->min_len;
        best = m < best ? m : best;
    }
    if ((n->types & JT_ARR) && (n->max_items < 0 || n->max_items >= n->min_items)) {
        long m = 2;
        if (n->min_items > 0) m += (long)n->min_items * (js_node_at(s, n->items)->min_bytes + 1) - 1;
        best = m < best ? m : best;
    }
    if (n->types & JT_OBJ) {
        int m = obj_min(s, n);
        best = m < best ? m : best;
    }
    return best >= JS_INF ? JS_INF : (int)best;
}

static void settle_min_bytes(da_json_schema *s) {
    for (int i = 0; i < s->n_nodes; i++) s->nodes[i].min_bytes = JS_INF;
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = 0; i < s->n_nodes; i++) {
            js_node *n = &s->nodes[i];
            if (n->ref >= 0) continue;
            int m = min_bytes_of(s, n);
            if (m < n->min_bytes) n->min_bytes = m, changed = 1;
        }
    }
    for (int i = 0; i < s->n_nodes; i++)
        if (s->nodes[i].ref >= 0) s->nodes[i].min_bytes = js_node_at(s, i)->min_bytes;
}

static da_status finish(da_json_schema *s, compiler *c, da_json_schema **out) {
    if (!c->st.code) {
        s->lit_true_false = s->n_lits;
        if (add_lit(c, "true", 4, -1) < 0 || add_lit(c, "false", 5, -1) < 0) goto bad;
        s->lit_null = s->n_lits;
        if (add_lit(c, "null", 4, -1) < 0) goto bad;
        settle_min_bytes(s);
        if (js_node_at(s, s->root)->min_bytes >= JS_INF) {
            fail(c, "no JSON text satisfies the schema within the decoder's limits (numbers of at most %d digits, "
                    "nesting of at most %d)", JS_MAX_DIGITS, DA_JSON_MAX_DEPTH);
            goto bad;
        }
        *out = s;
        return da_ok();
    }
bad:
    da_json_schema_free(s);
    return c->st;
}

da_status da_json_schema_compile(da_json_schema **out, const cJSON *schema, const char *where) {
    *out = NULL;
    da_json_schema *s = calloc(1, sizeof *s);
    if (!s) return da_errorf("%s: out of memory", where);
    compiler c = {.s = s, .root = schema, .where = where};
    s->root = compile_node(&c, schema);
    return finish(s, &c, out);
}

da_status da_json_schema_any_object(da_json_schema **out) {
    *out = NULL;
    da_json_schema *s = calloc(1, sizeof *s);
    if (!s) return da_errorf("json_object: out of memory");
    compiler c = {.s = s, .where = "response_format"};
    int obj = new_node(&c), any = new_node(&c);
    if (obj >= 0 && any >= 0) {
        s->nodes[any].types = JT_ALL;
        s->nodes[any].items = s->nodes[any].additional = any;
        s->nodes[obj].types = JT_OBJ;
        s->nodes[obj].additional = any;
        s->root = obj;
    }
    return finish(s, &c, out);
}

void da_json_schema_free(da_json_schema *s) {
    if (!s) return;
    for (int i = 0; i < s->n_lits; i++) free(s->lits[i].text);
    free(s->lits);
    free(s->nodes);
    free(s->kids);
    free(s);
}
