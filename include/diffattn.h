/* diffattn: the Differential Transformer (DIFF V1) and its softmax baseline, in C11.
 * This umbrella header includes every public header of the library; each
 * subsystem's header can also be included alone. */
#ifndef DIFFATTN_H
#define DIFFATTN_H

#include "diffattn/core.h"
#include "diffattn/config.h"
#include "diffattn/model.h"
#include "diffattn/train.h"
#include "diffattn/generate.h"
#include "diffattn/tokenizer.h"
#include "diffattn/data.h"
#include "diffattn/eval.h"
#include "diffattn/experiments.h"

#endif
