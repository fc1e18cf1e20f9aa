/* The compiled form of a JSON schema, shared by the compiler
 * (json_schema.c), the matcher (json_match.c) and the number rules
 * (json_number.c). Private to src/infer/. */
#ifndef DA_INFER_JSON_SCHEMA_NODE_H
#define DA_INFER_JSON_SCHEMA_NODE_H

#include <stdint.h>

/* The handle json_schema.h declares, named here without including it: json_schema.c
 * includes this header, and the two including each other would be a module circle. */
typedef struct da_json_schema da_json_schema;

/* JSON types a node admits (js_node.types). */
enum { JT_NULL = 1, JT_BOOL = 2, JT_INT = 4, JT_NUM = 8, JT_STR = 16, JT_ARR = 32, JT_OBJ = 64, JT_ALL = 127 };

#define JS_INF (1 << 28) /* "no text": a node no value satisfies, a state with no completion */
#define JS_MAX_DIGITS 15 /* significant digits of a number: exact through strtod */
#define JS_MAX_EXP_DIGITS 2

typedef struct {
    int ref;         /* >= 0: this node is the node `ref` ($ref); the other fields unused */
    unsigned types;  /* JT_* admitted */
    int any_of;      /* > 0: the value is one of nodes kids[any_of_at .. + any_of) */
    int any_of_at;
    int is_enum;     /* enum/const: the value is one of lits[lits_at .. + n_lits) (none: no value) */
    int n_lits;
    int lits_at;
    /* string */
    int min_len, max_len; /* code points; max_len -1: none */
    /* number / integer */
    int has_lo, has_hi, lo_excl, hi_excl;
    double lo, hi;
    /* array */
    int items;            /* node of every item */
    int min_items, max_items; /* max -1: none */
    /* object */
    int n_props, props_at; /* properties: props[props_at .. + n_props) */
    uint64_t required;     /* bit i: props[props_at + i] is required */
    int additional;        /* n_props == 0: node of the values of free keys; -1: no key */
    int min_bytes;         /* the shortest value's length in bytes (JS_INF: none) */
} js_node;

typedef struct {
    char *text; /* a literal's JSON text; a property's key as a JSON string, quotes included */
    int len;
    int node;   /* a property's value node */
} js_lit;

struct da_json_schema {
    js_node *nodes;
    int n_nodes, cap_nodes;
    int *kids;
    int n_kids, cap_kids;
    js_lit *lits; /* literals and property keys */
    int n_lits, cap_lits;
    int root;
    int lit_true_false, lit_null; /* lits index of "true","false" and of "null" */
};

/* The node n stands for, $refs followed. */
static inline const js_node *js_node_at(const da_json_schema *s, int n) {
    while (s->nodes[n].ref >= 0) n = s->nodes[n].ref;
    return &s->nodes[n];
}

/* Numbers: text (len bytes) is a prefix of a number of node n. */
/* 1 when text is a whole number within n's type, limits and bounds. */
int js_num_complete(const js_node *n, const char *text, int len);
/* The fewest bytes appended to text that make it complete; -1 when none do (or text is no valid prefix). */
int js_num_min_left(const js_node *n, const char *text, int len);

#endif
