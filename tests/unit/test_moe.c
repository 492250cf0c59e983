/* The CPU backend's mixture-of-experts op (kernels/cpu/moe.c) against a
 * plain reference written here: softmax top-k routing with and without
 * renormalization, each token's experts summed, in f32, int8 and Q8_0 expert
 * weights; expert parallelism (rank shares add up to all experts) and batch
 * invariance (a row's experts and output do not depend on its neighbours). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/dequant.h"
#include "models/moe.h"
#include "tests/unit/test_util.h"

#define E 6
#define K 2
#define DIM 64
#define FFN 64
#define N 9

static float gate_up[E][2 * FFN * DIM], down[E][DIM * FFN];
static float x[N * DIM], logits[N * E];

static float uniform(unsigned *state)
{
    *state = *state * 1664525u + 1013904223u;
    return (float)(*state >> 8) / (float)(1u << 24) * 2.0f - 1.0f;
}

static void random_layer(void)
{
    unsigned s = 7;
    for (int e = 0; e < E; e++) {
        for (int i = 0; i < 2 * FFN * DIM; i++)
            gate_up[e][i] = uniform(&s) * 0.2f;
        for (int i = 0; i < DIM * FFN; i++)
            down[e][i] = uniform(&s) * 0.2f;
    }
    for (int i = 0; i < N * DIM; i++)
        x[i] = uniform(&s);
    for (int i = 0; i < N * E; i++)
        logits[i] = uniform(&s) * 3.0f;
}

/* out[DIM] = Σ over the top-K experts of weight · FFN_e(x), and the experts. */
static void reference(int t, int norm, const float (*gu)[2 * FFN * DIM], const float (*dn)[DIM * FFN],
                      float *out, int *experts)
{
    const float *l = logits + t * E;
    double p[E], sum = 0, top = 0, w[K];
    for (int e = 0; e < E; e++)
        sum += p[e] = exp(l[e]);
    for (int j = 0; j < K; j++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if ((j == 0 || e != experts[0]) && (best < 0 || l[e] > l[best]))
                best = e;
        experts[j] = best;
        top += w[j] = p[best] / sum;
    }
    memset(out, 0, DIM * sizeof(float));
    for (int j = 0; j < K; j++) {
        int e = experts[j];
        float h[FFN];
        for (int f = 0; f < FFN; f++) {
            double g = 0, u = 0;
            for (int d = 0; d < DIM; d++) {
                g += gu[e][f * DIM + d] * x[t * DIM + d];
                u += gu[e][(FFN + f) * DIM + d] * x[t * DIM + d];
            }
            h[f] = (float)(g / (1 + exp(-g)) * u);
        }
        for (int d = 0; d < DIM; d++) {
            double y = 0;
            for (int f = 0; f < FFN; f++)
                y += dn[e][d * FFN + f] * h[f];
            out[d] += (float)(y * (norm ? w[j] / top : w[j]));
        }
    }
}

typedef struct {
    tram_backend *be;
    tram_weight gu[E], dn[E];
    tram_moe_scratch s;
} moe_fixture;

static void *zalloc(size_t bytes) { return calloc(1, bytes); }

static moe_fixture make_fixture(tram_wtype type)
{
    moe_fixture f = {.be = test_cpu_backend()};
    for (int e = 0; e < E; e++) {
        f.be->upload_weight(f.be, &f.gu[e], gate_up[e], 2 * FFN, DIM, type);
        f.be->upload_weight(f.be, &f.dn[e], down[e], DIM, FFN, type);
    }
    int rows = N * K;
    f.s = (tram_moe_scratch){.max_rows = rows, .dim = DIM, .expert = zalloc(rows * 4), .weight = zalloc(rows * 4),
                             .order = zalloc(rows * 4), .slot = zalloc(rows * 4), .offsets = zalloc((E + 1) * 4),
                             .x = zalloc(rows * DIM * 4), .y = zalloc(rows * DIM * 4),
                             .gate_up = zalloc(rows * 2 * FFN * 4), .hidden = zalloc(rows * FFN * 4)};
    return f;
}

static void free_fixture(moe_fixture *f)
{
    for (int e = 0; e < E; e++) {
        f->be->free_weight(f->be, &f->gu[e]);
        f->be->free_weight(f->be, &f->dn[e]);
    }
    void *bufs[] = {f->s.expert, f->s.weight, f->s.order, f->s.slot, f->s.offsets, f->s.x, f->s.y, f->s.gate_up,
                    f->s.hidden};
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        free(bufs[i]);
    f->be->destroy(f->be);
}

/* Runs experts [first, first + count) over rows [t0, t0 + n) into out. */
static void run(moe_fixture *f, int norm, int first, int count, int t0, int n, float *out)
{
    tram_moe_layer L = {.n_experts = E, .top_k = K, .norm_topk = norm, .first = first, .count = count,
                        .ffn = FFN, .gate_up = f->gu + first, .down = f->dn + first};
    f->be->moe(f->be, out, x + t0 * DIM, logits + t0 * E, &L, &f->s, n);
    tram_error err;
    cr_assert(!f->be->sync(f->be, &err), "%s", err.msg);
}

/* The op's experts equal the reference's, and its outputs are within tol of
 * the largest reference value of the token. */
static void check_outputs(moe_fixture *f, int norm, float tol)
{
    static float out[N * DIM], ref[DIM];
    run(f, norm, 0, E, 0, N, out);
    for (int t = 0; t < N; t++) {
        int experts[K];
        reference(t, norm, gate_up, down, ref, experts);
        for (int j = 0; j < K; j++)
            cr_assert_eq(f->s.expert[t * K + j], experts[j], "token %d choice %d", t, j);
        float scale = 0;
        for (int d = 0; d < DIM; d++)
            scale = fmaxf(scale, fabsf(ref[d]));
        for (int d = 0; d < DIM; d++)
            cr_assert(fabsf(out[t * DIM + d] - ref[d]) <= tol * scale, "norm %d token %d [%d]: %f, reference %f",
                      norm, t, d, out[t * DIM + d], ref[d]);
    }
}

static void check_against_reference(tram_wtype type, float tol)
{
    random_layer();
    moe_fixture f = make_fixture(type);
    for (int norm = 0; norm < 2; norm++)
        check_outputs(&f, norm, tol);
    free_fixture(&f);
}

Test(moe, f32_experts_match_the_reference)
{
    check_against_reference(TRAM_W_F32, 1e-5f);
}

Test(moe, int8_experts_stay_close_to_the_reference)
{
    check_against_reference(TRAM_W_INT8, 0.03f);
}

/* Random Q8_0 blocks (f16 scale, 32 int8) for rows x cols, and their values. */
static void q8_0_matrix(unsigned *state, uint8_t *blocks, float *values, int rows, int cols)
{
    size_t n = (size_t)rows * cols / 32;
    for (size_t b = 0; b < n; b++) {
        uint8_t *p = blocks + b * 34;
        uint16_t d = (uint16_t)(0x1800 + (unsigned)((uniform(state) + 1.0f) * 0x500));  /* ~2^-9 .. 2^-7 */
        memcpy(p, &d, 2);
        for (int j = 0; j < 32; j++)
            p[2 + j] = (uint8_t)(int8_t)(uniform(state) * 127.0f);
    }
    tram_error err;
    cr_assert(!tram_dequantize(TRAM_GGML_Q8_0, blocks, values, (int64_t)rows * cols, &err), "%s", err.msg);
}

/* Q8_0 blocks: the reference multiplies by the blocks' own values, so only
 * the activations' rounding to int8 per 32 separates the two. */
Test(moe, q8_0_experts_stay_close_to_the_reference)
{
    random_layer();
    moe_fixture f = make_fixture(TRAM_W_F32);
    static uint8_t gu_q[2 * FFN * DIM / 32 * 34], dn_q[DIM * FFN / 32 * 34];
    unsigned state = 11;
    for (int e = 0; e < E; e++) {
        f.be->free_weight(f.be, &f.gu[e]);
        f.be->free_weight(f.be, &f.dn[e]);
        q8_0_matrix(&state, gu_q, gate_up[e], 2 * FFN, DIM);
        q8_0_matrix(&state, dn_q, down[e], DIM, FFN);
        f.be->upload_weight_blocks(f.be, &f.gu[e], gu_q, 2 * FFN, DIM, TRAM_W_Q8_0);
        f.be->upload_weight_blocks(f.be, &f.dn[e], dn_q, DIM, FFN, TRAM_W_Q8_0);
    }
    check_outputs(&f, 1, 0.03f);
    free_fixture(&f);
}

/* Three ranks' shares of the experts, each adding only its own, sum to the
 * whole layer: what the all-reduce after the op computes. */
Test(moe, rank_shares_of_the_experts_add_up_to_all_of_them)
{
    random_layer();
    moe_fixture f = make_fixture(TRAM_W_F32);
    static float all[N * DIM], part[N * DIM], sum[N * DIM];
    run(&f, 1, 0, E, 0, N, all);
    int covered = 0;
    for (int rank = 0; rank < 4; rank++) {
        int first, count;
        tram_moe_share(E, rank, 4, &first, &count);
        cr_assert_eq(first, covered, "rank %d starts at %d", rank, first);
        covered += count;
        run(&f, 1, first, count, 0, N, part);
        for (int i = 0; i < N * DIM; i++)
            sum[i] += part[i];
    }
    cr_assert_eq(covered, E);
    for (int i = 0; i < N * DIM; i++)
        cr_assert(fabsf(sum[i] - all[i]) <= 1e-5f, "[%d]: ranks %f, whole %f", i, sum[i], all[i]);
    free_fixture(&f);
}

Test(moe, a_rows_experts_do_not_depend_on_its_neighbours)
{
    random_layer();
    moe_fixture f = make_fixture(TRAM_W_F32);
    static float batched[N * DIM], alone[DIM];
    int32_t experts[N * K];
    run(&f, 0, 0, E, 0, N, batched);
    memcpy(experts, f.s.expert, sizeof(experts));
    for (int t = 0; t < N; t++) {
        run(&f, 0, 0, E, t, 1, alone);
        for (int j = 0; j < K; j++)
            cr_assert_eq(f.s.expert[j], experts[t * K + j], "token %d choice %d", t, j);
        for (int d = 0; d < DIM; d++)
            cr_assert(fabsf(alone[d] - batched[t * DIM + d]) <= 1e-5f, "token %d [%d]", t, d);
    }
    free_fixture(&f);
}

Test(moe, add_gated_scales_by_the_sigmoid_of_the_gate)
{
    tram_backend *be = test_cpu_backend();
    float y[2 * 3] = {1, 2, 3, 4, 5, 6}, s[2 * 3] = {1, 1, 1, 2, 2, 2}, g[2] = {0.0f, -1.0f};
    be->add_gated(be, y, s, g, 2, 3);
    float half = 0.5f, low = 1.0f / (1.0f + expf(1.0f));
    for (int i = 0; i < 3; i++) {
        cr_assert_float_eq(y[i], (float)(i + 1) + half, 1e-6f);
        cr_assert_float_eq(y[3 + i], (float)(i + 4) + 2 * low, 1e-6f);
    }
    be->destroy(be);
}
