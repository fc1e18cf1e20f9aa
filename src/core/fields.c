/* Configuration tables (see da_field in diffattn/core.h): the operations
 * every table shares, by field type. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diffattn/core.h"
#include "diffattn/fields.h"

#define FIELD_PTR(obj, f) ((char *)(obj) + (f)->offset)
#define FIELD_CPTR(obj, f) ((const char *)(obj) + (f)->offset)

/* Numeric value of a field, for range checks (u64 is not range-checked). */
static double field_value(const da_field *f, const void *obj) {
    const char *p = FIELD_CPTR(obj, f);
    switch (f->type) {
    case DA_FIELD_INT:
    case DA_FIELD_BOOL: return *(const int *)p;
    case DA_FIELD_ENUM: return *(const int *)p;
    case DA_FIELD_LONG: return (double)*(const long *)p;
    case DA_FIELD_U64: return (double)*(const uint64_t *)p;
    case DA_FIELD_FLOAT: return *(const float *)p;
    }
    return 0;
}

static void set_value(const da_field *f, void *obj, double v) {
    char *p = FIELD_PTR(obj, f);
    switch (f->type) {
    case DA_FIELD_INT:
    case DA_FIELD_BOOL:
    case DA_FIELD_ENUM: *(int *)p = (int)v; break;
    case DA_FIELD_LONG: *(long *)p = (long)v; break;
    case DA_FIELD_U64: *(uint64_t *)p = (uint64_t)v; break;
    case DA_FIELD_FLOAT: *(float *)p = (float)v; break;
    }
}

void da_fields_default(const da_field *fields, int n, void *obj) {
    for (int i = 0; i < n; i++) set_value(&fields[i], obj, fields[i].def);
}

const da_field *da_fields_find(const da_field *fields, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (!strcmp(fields[i].key, key)) return &fields[i];
    return NULL;
}

static void format_bound(char *buf, size_t n, double v) {
    if (isinf(v)) snprintf(buf, n, "%sinf", v < 0 ? "-" : "");
    else snprintf(buf, n, "%.9g", v);
}

da_status da_fields_check(const da_field *fields, int n, const void *obj) {
    for (int i = 0; i < n; i++) {
        const da_field *f = &fields[i];
        if (f->type == DA_FIELD_U64) continue;
        const double v = field_value(f, obj);
        const int lo_ok = f->bounds[0] == '[' ? v >= f->lo : v > f->lo;
        const int hi_ok = f->bounds[1] == ']' ? v <= f->hi : v < f->hi;
        /* a float must be finite even where the range is unbounded; NaN fails both */
        if (lo_ok && hi_ok && !(f->type == DA_FIELD_FLOAT && !isfinite(v))) continue;
        char val[64], lo[32], hi[32];
        if (f->type == DA_FIELD_ENUM) {
            snprintf(val, sizeof val, "%d", (int)v);
            char names[128] = "";
            for (int k = 0; f->names[k]; k++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? ", " : "", f->names[k]);
            return da_errorf("%s: unknown value %s (expected %s)", f->key, val, names);
        }
        da_field_format(f, obj, val, sizeof val);
        format_bound(lo, sizeof lo, f->lo);
        format_bound(hi, sizeof hi, f->hi);
        return da_errorf("%s: %s must lie in %c%s, %s%c", f->key, val, f->bounds[0], lo, hi, f->bounds[1]);
    }
    return da_ok();
}

/* Shortest decimal that reads back as the same float. */
static void format_float(char *buf, size_t n, float v) {
    for (int prec = 6; prec <= 9; prec++) {
        snprintf(buf, n, "%.*g", prec, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

void da_field_format(const da_field *f, const void *obj, char *buf, size_t n) {
    const char *p = FIELD_CPTR(obj, f);
    switch (f->type) {
    case DA_FIELD_INT: snprintf(buf, n, "%d", *(const int *)p); break;
    case DA_FIELD_LONG: snprintf(buf, n, "%ld", *(const long *)p); break;
    case DA_FIELD_U64: snprintf(buf, n, "%" PRIu64, *(const uint64_t *)p); break;
    case DA_FIELD_FLOAT:
        /* names[0], when given, spells the default (a float whose default means "derived") */
        if (f->names && f->names[0] && *(const float *)p == (float)f->def) snprintf(buf, n, "%s", f->names[0]);
        else format_float(buf, n, *(const float *)p);
        break;
    case DA_FIELD_BOOL: snprintf(buf, n, "%s", *(const int *)p ? "true" : "false"); break;
    case DA_FIELD_ENUM: {
        int v = *(const int *)p, k = 0;
        while (f->names[k] && k < v) k++;
        if (v >= 0 && f->names[k]) snprintf(buf, n, "%s", f->names[k]);
        else snprintf(buf, n, "%d", v);
        break;
    }
    }
}

da_status da_field_parse(const da_field *f, void *obj, const char *s) {
    char *p = FIELD_PTR(obj, f), *end;
    errno = 0;
    switch (f->type) {
    case DA_FIELD_INT:
    case DA_FIELD_LONG: {
        long v = strtol(s, &end, 10);
        if (errno || end == s || *end || (f->type == DA_FIELD_INT && (v < INT_MIN || v > INT_MAX)))
            return da_errorf("\"%s\" is not an integer", s);
        if (f->type == DA_FIELD_INT) *(int *)p = (int)v;
        else *(long *)p = v;
        return da_ok();
    }
    case DA_FIELD_U64: {
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || end == s || *end || s[0] == '-') return da_errorf("\"%s\" is not an unsigned integer", s);
        *(uint64_t *)p = v;
        return da_ok();
    }
    case DA_FIELD_FLOAT: {
        if (f->names && f->names[0] && !strcmp(s, f->names[0])) {
            *(float *)p = (float)f->def;
            return da_ok();
        }
        float v = strtof(s, &end);
        if (errno || end == s || *end)
            return f->names && f->names[0] ? da_errorf("\"%s\" (expected %s or a number)", s, f->names[0])
                                           : da_errorf("\"%s\" is not a number", s);
        *(float *)p = v;
        return da_ok();
    }
    case DA_FIELD_BOOL:
        /* 1 and 0: training states written before bools were spelled out */
        if (!strcmp(s, "true") || !strcmp(s, "1")) *(int *)p = 1;
        else if (!strcmp(s, "false") || !strcmp(s, "0")) *(int *)p = 0;
        else return da_errorf("\"%s\" (expected true or false)", s);
        return da_ok();
    case DA_FIELD_ENUM:
        for (int k = 0; f->names[k]; k++)
            if (!strcmp(s, f->names[k])) {
                *(int *)p = k;
                return da_ok();
            }
        {
            char names[128] = "";
            for (int k = 0; f->names[k]; k++)
                snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", k ? " or " : "",
                         f->names[k]);
            return da_errorf("\"%s\" (expected %s)", s, names);
        }
    }
    return da_errorf("unknown field type");
}

static size_t field_size(const da_field *f) {
    return f->type == DA_FIELD_LONG ? sizeof(long) : f->type == DA_FIELD_U64 ? sizeof(uint64_t)
           : f->type == DA_FIELD_FLOAT ? sizeof(float) : sizeof(int);
}

void da_field_copy(const da_field *f, void *dst, const void *src) {
    memcpy(FIELD_PTR(dst, f), FIELD_CPTR(src, f), field_size(f));
}

int da_field_equal(const da_field *f, const void *a, const void *b) {
    return !memcmp(FIELD_CPTR(a, f), FIELD_CPTR(b, f), field_size(f));
}
