/* moe.c — the mixture-of-experts FFN on the CPU, the reference of
 * kernels/cuda/moe.cu: route each token (softmax, top-k), group the routed
 * rows by expert, multiply each expert's gathered rows at once (a grouped
 * GEMM, gemm.c's cpu_matmul_grouped; any weight format cpu_matmul runs works
 * per expert: f32, int8 W8A8, GGUF blocks), and add each token's expert
 * outputs back in ascending expert order. */
#include <math.h>
#include <string.h>

#include "kernels/cpu/cpu_impl.h"

/* Token t's top_k experts by softmax probability (the lower index first on
 * ties), and their weights, renormalized when L->norm_topk.  The arithmetic
 * is transformers': probabilities in f32, then the top-k, then the division
 * by their sum. */
static void route_token(const float *logits, const tram_moe_layer *L, int32_t *expert, float *weight)
{
    float max = logits[0], sum = 0.0f;
    for (int e = 1; e < L->n_experts; e++)
        max = fmaxf(max, logits[e]);
    for (int e = 0; e < L->n_experts; e++)
        sum += expf(logits[e] - max);
    for (int j = 0; j < L->top_k; j++) {
        int best = -1;
        for (int e = 0; e < L->n_experts; e++) {
            int taken = 0;
            for (int i = 0; i < j; i++)
                taken |= expert[i] == e;
            if (!taken && (best < 0 || logits[e] > logits[best]))
                best = e;
        }
        expert[j] = best;
        weight[j] = expf(logits[best] - max) / sum;
    }
    if (!L->norm_topk)
        return;
    float top = 0.0f;
    for (int j = 0; j < L->top_k; j++)
        top += weight[j];
    for (int j = 0; j < L->top_k; j++)
        weight[j] /= top;
}

/* Counting sort of the rows this backend holds by expert; tokens stay in
 * ascending order within an expert.  Returns the number of rows held. */
static int group_rows(const tram_moe_layer *L, const tram_moe_scratch *s, int rows)
{
    int32_t *off = s->offsets;
    memset(off, 0, (size_t)(L->count + 1) * sizeof(*off));
    for (int r = 0; r < rows; r++) {
        int e = s->expert[r] - L->first;
        if (e >= 0 && e < L->count)
            off[e + 1]++;
    }
    for (int e = 0; e < L->count; e++)
        off[e + 1] += off[e];
    /* off[e] walks to the end of expert e's rows, which is where e + 1's
     * begin: shifting the array back by one restores the starts */
    for (int r = 0; r < rows; r++) {
        int e = s->expert[r] - L->first;
        s->slot[r] = e >= 0 && e < L->count ? off[e]++ : -1;
        if (s->slot[r] >= 0)
            s->order[s->slot[r]] = r;
    }
    memmove(off + 1, off, (size_t)L->count * sizeof(*off));
    off[0] = 0;
    return off[L->count];
}

/* out[t] = Σ weight · y over t's choices held here, in ascending expert order. */
static void add_back(float *out, const tram_moe_layer *L, const tram_moe_scratch *s, int t, int dim)
{
    float *o = out + (size_t)t * dim;
    const int32_t *ex = s->expert + (size_t)t * L->top_k;
    memset(o, 0, (size_t)dim * sizeof(float));
    int done = -1;  /* experts up to this one are added */
    for (int j = 0; j < L->top_k; j++) {
        int next = -1;
        for (int i = 0; i < L->top_k; i++)
            if (ex[i] > done && (next < 0 || ex[i] < ex[next]))
                next = i;
        done = ex[next];
        int slot = s->slot[(size_t)t * L->top_k + next];
        if (slot < 0)
            continue;
        const float *y = (const float *)s->y + (size_t)slot * dim;
        float w = s->weight[(size_t)t * L->top_k + next];
        for (int k = 0; k < dim; k++)
            o[k] += y[k] * w;
    }
}

typedef struct {
    void *out;
    const void *x, *logits;
    const tram_moe_layer *L;
    const tram_moe_scratch *s;
} moe_job;

static void route_chunk(void *arg, int t0, int t1)
{
    const moe_job *j = arg;
    for (int t = t0; t < t1; t++)
        route_token((const float *)j->logits + (size_t)t * j->L->n_experts, j->L, j->s->expert + (size_t)t * j->L->top_k,
                    j->s->weight + (size_t)t * j->L->top_k);
}

/* Row i of the grouped input: its token's row of x. */
static void gather_chunk(void *arg, int i0, int i1)
{
    const moe_job *j = arg;
    int dim = j->s->dim;
    for (int i = i0; i < i1; i++)
        memcpy((float *)j->s->x + (size_t)i * dim, (const float *)j->x + (size_t)(j->s->order[i] / j->L->top_k) * dim,
               (size_t)dim * sizeof(float));
}

static void add_back_chunk(void *arg, int t0, int t1)
{
    const moe_job *j = arg;
    for (int t = t0; t < t1; t++)
        add_back(j->out, j->L, j->s, t, j->s->dim);
}

void cpu_moe_ffn(tram_backend *be, void *out, const void *x, const void *logits, const tram_moe_layer *L,
                 const tram_moe_scratch *s, int n)
{
    int rows = n * L->top_k;
    if (rows > s->max_rows || L->top_k > L->n_experts || L->first < 0 || L->first + L->count > L->n_experts) {
        cpu_fail(be, "moe: more routed rows than the scratch holds, or experts out of range");
        return;
    }
    moe_job j = {.out = out, .x = x, .logits = logits, .L = L, .s = s};
    cpu_rows(be, n, route_chunk, &j);
    int held = group_rows(L, s, rows);
    cpu_rows(be, held, gather_chunk, &j);
    cpu_matmul_grouped(be, s->gate_up, s->x, L->gate_up, s->offsets, L->count);
    cpu_silu_mul(be, s->hidden, s->gate_up, held, L->ffn);
    cpu_matmul_grouped(be, s->y, s->hidden, L->down, s->offsets, L->count);
    cpu_rows(be, n, add_back_chunk, &j);
}

void cpu_add_gated(tram_backend *be, void *y, const void *x, const void *gate, int n, int dim)
{
    (void)be;
    for (int i = 0; i < n; i++) {
        float g = 1.0f / (1.0f + expf(-((const float *)gate)[i]));
        float *yr = (float *)y + (size_t)i * dim;
        const float *xr = (const float *)x + (size_t)i * dim;
        for (int k = 0; k < dim; k++)
            yr[k] += g * xr[k];
    }
}
