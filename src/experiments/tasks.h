/* Token-level synthetic retrieval tasks, generated from a seed (definitions
 * and their sources in docs/tasks.md).
 *
 *   mqar          multi-query associative recall (Zoology): `pairs` key-value
 *                 pairs, then each key asked once at a power-law gap.
 *   noisy-recall  in-context recall with noise (MAD): key-value pairs drawn
 *                 with repeats, slots of noise tokens from their own
 *                 vocabulary in between; every repeated key's value is asked.
 *
 * A sample is (tokens, targets) of T positions each: targets[t] is the token
 * the model must predict after tokens[t] at an answer position, and -1 (the
 * loss mask of cross_entropy) everywhere else. */
#ifndef DA_TASKS_H
#define DA_TASKS_H

#include "diffattn/core.h"

typedef enum { DA_TASK_MQAR = 0, DA_TASK_NOISY_RECALL = 1 } da_task_kind;

typedef struct {
    da_task_kind kind;
    int seq;         /* T, tokens per sequence; even */
    int vocab;       /* the model's vocabulary; every token lies in [0, vocab) */
    int pairs;       /* mqar: key-value pairs, each asked once */
    double alpha;    /* mqar: query gaps g = 0.. drawn with p(g) ~ (g + 1)^(alpha - 1) (Zoology's power_a) */
    double noise;    /* noisy-recall: probability that a two-token slot is noise */
    int noise_vocab; /* noisy-recall: tokens [vocab - noise_vocab, vocab) are noise */
} da_task_config;

/* Zoology's and MAD's defaults, scaled to small models (docs/tasks.md). */
void da_task_config_default(da_task_config *c, da_task_kind kind);
da_status da_task_validate(const da_task_config *c);
const char *da_task_name(da_task_kind k);
int da_task_parse(const char *s, da_task_kind *out); /* 0 ok, -1 unknown */

/* One sample of c from r: tokens and targets (T) as above. src (T), when not
 * NULL, gets at each answer position t the position of the key that t
 * retrieves (its value follows it at src[t] + 1: for noisy-recall the most
 * recent earlier occurrence of the pair), and -1 elsewhere. Returns the
 * number of answer positions. c must be valid. */
int da_task_sample(const da_task_config *c, da_rng *r, int *tokens, int *targets, int *src);

/* noisy-recall: whether token is a noise token (0 for mqar). */
int da_task_is_noise(const da_task_config *c, int token);

#endif
