/* op_profile.h — a backend that times the ops of another, for `tram bench
 * roofline`: the model is given a copy of the CPU backend's op table whose
 * ops call the real ones and add up, per class of op, the seconds spent and
 * the bytes and FLOPs each had to move (the compulsory traffic: every
 * weight, input and output once, each sequence's KV once).  The CPU backend
 * is synchronous, so the wall time of a call is the op's. */
#ifndef TRAM_CLI_OP_PROFILE_H
#define TRAM_CLI_OP_PROFILE_H

#include "kernels/backend.h"
#include "models/model.h"

typedef enum {
    OP_GEMM_QKV, OP_GEMM_O, OP_GEMM_GATE_UP, OP_GEMM_DOWN, OP_LM_HEAD, /* the GEMMs first */
    OP_ATTENTION, OP_ROPE_KV, OP_NORM, OP_SILU, OP_EMBED, OP_COPY, OP_OTHER,
    OP_CLASSES
} tram_op_class;

#define OP_GEMMS (OP_LM_HEAD + 1)

typedef struct {
    double seconds, bytes, flops;
} tram_op_cost;

typedef struct {
    tram_backend be;          /* first: the table the model is given */
    tram_backend inner;       /* the real ops */
    tram_model_config cfg;    /* to tell the matmuls apart by shape */
    tram_op_cost cost[OP_CLASSES];
} tram_op_profile;

/* p's table: inner's, with the ops a dense layer calls timed. */
void tram_op_profile_wrap(tram_op_profile *p, const tram_backend *inner, const tram_model_config *c);
void tram_op_profile_reset(tram_op_profile *p);
const char *tram_op_class_name(tram_op_class c);

#endif
