/* diffattn configuration tables: a configuration struct described by one
 * table of rows, which defaults, range checks, metadata, flags and resume read.
 * Implemented in src/core/fields.c. */
#ifndef DIFFATTN_FIELDS_H
#define DIFFATTN_FIELDS_H

#include <stddef.h>

#include "diffattn/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A configuration struct (da_config, da_train_config) is described by one
 * table of da_field rows: defaults, range checks, checkpoint metadata, CLI
 * flags with their --help, and what --resume may change all read it, so a new
 * hyperparameter is one row. */
typedef enum {
    DA_FIELD_INT,   /* int */
    DA_FIELD_LONG,  /* long */
    DA_FIELD_U64,   /* uint64_t; no range check */
    DA_FIELD_FLOAT, /* float; must also be finite */
    DA_FIELD_BOOL,  /* int 0 or 1; metadata "true" / "false"; a CLI flag without a value */
    DA_FIELD_ENUM,  /* an enum (int-sized); value i is spelled names[i] */
} da_field_type;

typedef enum {
    DA_RESUME_FIXED,      /* the run's stored value stays; giving another one is an error */
    DA_RESUME_MAY_CHANGE, /* a value given on resume replaces the stored one */
    DA_RESUME_IGNORED,    /* the run's stored value stays; a value given on resume is ignored */
} da_resume_rule;

#define DA_STORED_UNLESS_DEFAULT 2

typedef struct {
    const char *key;    /* field name: metadata key (after the table's prefix) and error messages */
    const char *flag;   /* CLI flag without the dashes; NULL: not a flag */
    size_t offset;      /* offsetof(struct, field) */
    da_field_type type;
    double def, lo, hi; /* default and valid range */
    const char *bounds; /* "[]", "[)", "(]" or "()": whether lo and hi themselves are valid */
    da_resume_rule on_resume;
    int stored;         /* 1: written to and read from checkpoints; DA_STORED_UNLESS_DEFAULT: written only
                         * when not the default, and absent reads as the default (a field added later, so
                         * files without it keep their bytes and their meaning) */
    const char *help;
    const char *const *names; /* DA_FIELD_ENUM: NULL-terminated spellings; DA_FIELD_FLOAT: NULL, or names[0]
                               * spells the default (its format and a value the parser accepts) */
} da_field;

/* Every field of obj to its default. */
void da_fields_default(const da_field *fields, int n, void *obj);
/* The first field of obj outside its range, as "key: value must lie in [lo, hi]". */
da_status da_fields_check(const da_field *fields, int n, const void *obj);
/* The row named key, or NULL. */
const da_field *da_fields_find(const da_field *fields, int n, const char *key);
/* The field's value as text: integers in decimal, floats as the shortest
 * decimal that reads back as the same float, bools true/false, enums by name. */
void da_field_format(const da_field *f, const void *obj, char *buf, size_t n);
/* Parses text written by da_field_format (bools also accept 1 and 0) into
 * obj's field, without a range check. The message says what was expected; the
 * caller names the source. */
da_status da_field_parse(const da_field *f, void *obj, const char *s);
/* dst's field = src's. */
void da_field_copy(const da_field *f, void *dst, const void *src);
/* 1 when the field holds the same value in a and b. */
int da_field_equal(const da_field *f, const void *a, const void *b);

#ifdef __cplusplus
}
#endif
#endif
