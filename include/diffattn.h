/* diffattn: the Differential Transformer (DIFF V1) and its softmax baseline, in C11.
 * This umbrella header offers the library: models and their files, training,
 * the inference engine, tokenizers and data. Each subsystem's header can also
 * be included alone. Evaluations, studies, tasks, benchmarks, figures and the
 * server are the diffattn program's own (src/eval, experiments, tasks, study,
 * bench, serve), not part of the library's API. */
#ifndef DIFFATTN_H
#define DIFFATTN_H

#include "diffattn/core.h"
#include "diffattn/rng.h"
#include "diffattn/exec.h"
#include "diffattn/fields.h"
#include "diffattn/config.h"
#include "diffattn/model.h"
#include "diffattn/formats.h"
#include "diffattn/train.h"
#include "diffattn/generate.h"
#include "diffattn/tokenizer.h"
#include "diffattn/data.h"

#endif
