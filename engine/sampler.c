/* sampler.c — a sequence's next draw in the samplers' terms (see sampler.h). */
#include "engine/sampler.h"

int tram_seq_holds_stops(const tram_seq *s)
{
    return s->num_tokens - s->prompt_len < s->req->p.min_tokens;
}

tram_sampler_row tram_seq_sampler_row(const tram_seq *s)
{
    const tram_sampling_params *p = &s->req->p;
    return (tram_sampler_row){
        .temperature = p->temperature < TRAM_SAMPLE_GREEDY_BELOW ? 0.0f : p->temperature,
        .top_k = p->top_k > 0 ? p->top_k : 0,
        .top_p = p->top_p,
        .min_p = p->min_p,
        .repetition_penalty = p->repetition_penalty,
        .presence_penalty = p->presence_penalty,
        .frequency_penalty = p->frequency_penalty,
        .seed = s->req->seed,
    };
}

tram_sample_input tram_seq_sample_input(const tram_seq *s)
{
    const tram_request *r = s->req;
    int held = tram_seq_holds_stops(s);
    return (tram_sample_input){
        .p = tram_seq_sampler_row(s),
        .bias = r->p.logit_bias,
        .num_bias = r->p.num_logit_bias,
        .banned = held ? r->banned : NULL,
        .num_banned = held ? r->num_banned : 0,
        .sample_index = s->sample_index,
        .prompt = s->tokens,
        .prompt_len = s->prompt_len,
        .output = s->tokens + s->prompt_len,
        .output_len = s->num_tokens - s->prompt_len,
    };
}
