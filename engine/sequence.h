/* sequence.h — requests and their sequences, as the engine keeps them.
 *
 * A request owns n sequences, one per sample.  Until its prompt is computed it
 * has only sequence 0; then the others are forked from it, sharing its full
 * prompt blocks.  The scheduler moves sequences, not requests, between its
 * waiting and running queues: after a fork the samples of one request are
 * scheduled (and preempted) independently. */
#ifndef TRAM_SEQUENCE_H
#define TRAM_SEQUENCE_H

#include <stdint.h>

#include "engine/block_manager.h"
#include "engine/spec.h"
#include "engine/tram.h"
#include "tokenizer/tokenizer.h"

typedef enum { TRAM_SEQ_WAITING, TRAM_SEQ_RUNNING, TRAM_SEQ_FINISHED } tram_seq_status;

typedef struct tram_request tram_request;

typedef struct {
    tram_request *req;
    int sample_index;
    tram_seq_status status;
    /* scheduling key: smaller is served first and preempted last */
    int priority;
    uint64_t arrival;
    int seats;                 /* running slots it claims when admitted (n before the fork) */

    int32_t *tokens;           /* [max_model_len] prompt, then output */
    int num_tokens, prompt_len;
    int num_computed;          /* tokens whose KV is in the cache */
    tram_block_table table;
    tram_detok *detok;
    tram_matcher *matcher;     /* the grammar's state after this sample's output, or NULL */
    tram_finish_reason finish;
    int stop_index;            /* stop string that finished it, or -1 */
    const char *error;         /* TRAM_FINISH_ERROR's cause (tram_output.error) */
    int reported_first;        /* its first output has gone out */
    int reported_final;        /* its output with a finish reason has gone out */
    tram_spec_record spec;     /* its drafts' fate, for speculation's automatic rule */
    int draft_computed;        /* tokens whose KV a draft model holds (engine/spec_draft.c) */

    /* this step's output: step_tokens tokens (more than one when drafts
     * were accepted), the last ones of tokens */
    int step_tokens;
    size_t text_off, text_len; /* in the engine's text arena */
    tram_logprob_entry lp[TRAM_SPEC_MAX_TOKENS + 1];
    tram_token_logprob top[TRAM_SPEC_MAX_TOKENS + 1][TRAM_MAX_LOGPROBS];
} tram_seq;

struct tram_request {
    uint64_t id;
    tram_sampling_params p;    /* arrays point into the copies below */
    char **stop;
    tram_logit_bias *bias;
    int32_t *stop_ids;
    int32_t *banned;           /* end-of-generation and stop tokens, masked before min_tokens */
    int num_banned;
    uint64_t seed;
    double added_at;           /* tram_now() at add_request */
    double scheduled_at;       /* tram_now() when first scheduled; 0 until then */
    int max_tokens;            /* effective: never past max_model_len */
    int n, num_seqs, num_finished;
    int num_reported;          /* samples whose final output has gone out */
    tram_seq *seqs;            /* [n] */
    int cached_tokens;
    int lora_id;               /* its LoRA adapter (engine/lora_pool.h), 0: the base model */
    int admitted;              /* counted in the prompt totals */
    int skip_cache;            /* every prompt row is needed: no prefix-cache lookup */
    /* an embedding request (tram_engine_add_embedding): no sampling */
    tram_pooling pooling;      /* UNSET for a generation */
    int embed_dims;            /* values kept of the pooled state */
    double *pool;              /* [model dim]: the state pooled so far */
    float *embedding;          /* [embed_dims]: the result */
    int aborted;
    /* prompt logprobs, computed once by sequence 0 */
    tram_logprob_entry *prompt_lp;     /* [prompt_len] */
    tram_token_logprob *prompt_top;    /* [prompt_len][k] */
    int prompt_lp_done;                /* entries filled so far */
};

/* What a request needs to know about the engine it joins. */
typedef struct {
    const tram_tokenizer *tok;
    int vocab, max_model_len, max_blocks_per_seq, max_num_seqs;
    uint64_t seed;             /* for requests without one */
    uint64_t arrival;
} tram_request_env;

/* Range checks of tram_engine_validate_params, given the engine's limits. */
int tram_params_check(const tram_sampling_params *p, int vocab, int max_num_seqs,
                      const char **param, tram_error *err);

/* A request with its n sequences allocated (sequence 0 holds the prompt; the
 * others are filled in at the fork), copying every array of p. */
int tram_request_create(tram_request **out, uint64_t id, const tram_sampling_params *p,
                        const int32_t *prompt, int prompt_len, int priority,
                        const tram_request_env *env, tram_error *err);
void tram_request_free(tram_request *r);

#endif
