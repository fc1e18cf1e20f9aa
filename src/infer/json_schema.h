/* Constrained decoding to JSON: a JSON Schema subset compiled to a byte-level
 * automaton, and the mask of the tokens that keep the text a prefix of some
 * valid answer (docs/serving.md, "Structured output").
 *
 *     da_json_schema *s;  da_json_schema_compile(&s, schema_cjson, "response_format.json_schema.schema");
 *     da_json_state st;   da_json_start(s, &st);
 *     per step: da_token_mask_allowed(mask, s, &st, tokens_left, allowed) -> sample among allowed
 *               da_json_feed_bytes(s, &st, token's bytes)   ... until da_json_done(s, &st)
 *
 * The automaton is a pushdown matcher: a small stack of frames per
 * alternative (anyOf forks alternatives), each frame a value being read
 * (object, array, string, number, literal). Whitespace between tokens of the
 * JSON text is bounded (DA_JSON_MAX_WS bytes per gap), numbers have at most
 * 15 significant digits (and a 2-digit exponent when unbounded), so every
 * accepted text is short enough to parse exactly; strings are valid UTF-8
 * without control characters. da_json_min_left is the exact number of bytes
 * that still complete the value, so a token budget can always be met. */
#ifndef DA_INFER_JSON_SCHEMA_H
#define DA_INFER_JSON_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "diffattn/core.h"

#define DA_JSON_MAX_DEPTH 20 /* nested values; deeper schemas are refused, "any" values stop nesting here */
#define DA_JSON_MAX_ALTS 8   /* anyOf alternatives alive at once */
#define DA_JSON_MAX_WS 8     /* whitespace bytes between two tokens of the text */
#define DA_JSON_MAX_SET 64   /* properties of an object, values of an enum */
#define DA_JSON_NUM_TEXT 40  /* a number's text: sign, 15 digits, point, exponent */

typedef struct da_json_schema da_json_schema;

/* One frame of the matcher's stack. */
typedef struct {
    uint16_t node;  /* the schema node read here */
    uint8_t kind;   /* js_kind (json_match.c) */
    uint8_t phase;  /* where in the value */
    uint32_t count; /* object: the property whose value is read; array: items so far;
                     * string: code points so far; literal: bytes matched */
    uint64_t set;   /* object: properties seen; literal: candidates left; string: UTF-8 and escape state */
    uint64_t aux;   /* object reading a key: the properties it may still be */
} da_json_frame;

typedef struct {
    uint8_t depth, ws, num_len, pad;
    char num[DA_JSON_NUM_TEXT];  /* the number being read (only the top frame can be one) */
    da_json_frame f[DA_JSON_MAX_DEPTH];
} da_json_alt;

/* The matcher's state: a value type, copied freely. n_alts 0: dead (no valid continuation). */
typedef struct {
    int n_alts;
    da_json_alt alt[DA_JSON_MAX_ALTS];
} da_json_state;

/* Compiles schema (a JSON Schema object). where names it in messages
 * ("response_format.json_schema.schema"); a keyword outside the subset, a
 * malformed value, or a schema no text satisfies is refused naming it. */
da_status da_json_schema_compile(da_json_schema **out, const cJSON *schema, const char *where);
/* Any JSON object (OpenAI's json_object mode). */
da_status da_json_schema_any_object(da_json_schema **out);
void da_json_schema_free(da_json_schema *s);

void da_json_start(const da_json_schema *s, da_json_state *st);
/* Advances by one byte; returns 0 (and leaves n_alts 0) when no valid answer starts so. */
int da_json_feed(const da_json_schema *s, da_json_state *st, uint8_t byte);
int da_json_feed_bytes(const da_json_schema *s, da_json_state *st, const uint8_t *b, size_t n);
/* 1 when the text read so far is a whole valid answer. */
int da_json_done(const da_json_schema *s, const da_json_state *st);
/* 1 when the text is done and no byte can extend it (the answer must end here). */
int da_json_closed(const da_json_schema *s, const da_json_state *st);
/* The fewest bytes that complete a valid answer from here (0 when done); -1 when dead. */
int da_json_min_left(const da_json_schema *s, const da_json_state *st);

/* 1 when the text is inside a string's characters (no escape or UTF-8 sequence open) in the one
 * alternative: *count its characters so far, *min and *max its limits (max -1: none). */
int da_json_in_string(const da_json_schema *s, const da_json_state *st, int *count, int *min, int *max);

/* The vocabulary as byte strings, in a trie, for masks over every token at once. */
typedef struct da_token_mask da_token_mask;
/* bytes[i], len[i]: token i's bytes (len 0: a token that is never allowed, e.g. BOS);
 * end_ids: the tokens that end an answer (EOS, end of turn). */
da_status da_token_mask_build(da_token_mask **out, const uint8_t *const *bytes, const int *len, int V,
                              const int *end_ids, int n_end);
void da_token_mask_free(da_token_mask *m);
/* allowed: (V) set to 1 for each token whose bytes keep the text a prefix of a valid answer
 * that fits in tokens_left tokens counting this one (tokens_left <= 0: no budget), and for the
 * end tokens when the text is done; 0 elsewhere. Returns the count allowed. */
int da_token_mask_allowed(const da_token_mask *m, const da_json_schema *s, const da_json_state *st,
                          int tokens_left, uint8_t *allowed);

#endif
