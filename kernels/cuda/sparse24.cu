/* sparse24.cu — 2:4 sparse products through cuSPARSELt, the CUDA side of
 * kernels/cpu/sparse24.c (bf16) and kernels/cpu/sparse24_int8.c (int8).
 *
 * The library is not linked: it is 237 MB, not part of the CUDA toolkit, and
 * tram must start without it.  The first sparse24_prepare dlopens it
 * (kernels/dlib.h: $TRAM_CUSPARSELT, else libcusparseLt.so.0 through the
 * loader's search) and takes each function with the type of its prototype
 * in cusparseLt.h (fetched at build time, kernels/cuda/fetch_cusparselt.sh),
 * so a changed signature fails the compile, not the run.  It stays loaded
 * for the life of the process.  Every call is checked as the CUDA calls are
 * (check.h): the first failure is recorded and reported by sync().
 *
 * Layout: gemm.cu's.  Column-major cuSPARSELt sees the row-major W
 * [rows][cols] as a cols × rows matrix, so Yᵀ = op_T(W) · X with m = rows,
 * n = tokens, k = cols; W's 2:4 groups run along its rows, which is op_T(W)'s
 * k, as cuSPARSELt wants them.  Two kinds (s24_kinds): bf16 in and out with
 * f32 compute; and int8 in, int32 out with int32 compute (CUSPARSE_COMPUTE_32I),
 * whose sums are exact, so int8.cu quantizes the activations and applies its
 * dequant epilogue (per-token and per-row scales) around the product just
 * as for a dense int8 weight, and the result is the dense int8 path's bit
 * for bit.  At load each sparse matrix is uploaded dense (backend.cu: bf16,
 * or int8.cu's int8 codes and row scales), checked 2:4 by the library
 * (cusparseLtSpMMAPruneCheck2) and compressed once (cusparseLtSpMMACompress2);
 * the dense copy is freed, the scales kept.
 *
 * The library needs every dimension a multiple of 16 for 16-bit operands and
 * of 32 for 8-bit ones: sparse24_fits refuses other matrices at load (their
 * kind then runs dense, with the model's one line), and a product whose token
 * count is not one (decode's 1, 2, 4, 8; most prefills) runs on padded copies:
 * x copied into x_pad, the product into y_pad, its first n rows copied out
 * (the padding rows' garbage reaches only padding columns).  Both are sized
 * when a matrix is uploaded, for the max_rows given to sparse24_prepare
 * (rounded up to 32, both kinds' multiple), so no product allocates.  Plans
 * (one per kind, m, padded n, k) are built on a shape's first product and
 * cached in a direct-mapped table;
 * their algorithm is the library's default (CUSPARSELT_MATMUL_ALG_DEFAULT),
 * not cusparseLtMatmulSearch's: a search runs and times the product, which
 * cannot happen while a decode step's graph is being captured. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include <cusparseLt.h>

#include "kernels/cuda/cuda_impl.cuh"
#include "kernels/dlib.h"
#include "kernels/int8_format.h"

#define S24_ALIGN 16  /* bytes: the descriptors' alignment; also the 16-bit kind's multiple */
#define S24_ROWS_MULTIPLE 32  /* max_rows rounded up to it: a padded count fits either kind */
#define S24_PLANS 256

/* What differs between the two kinds: the operands' type, the output's, the
 * compute type, and the multiple every dimension must be. */
typedef struct {
    cudaDataType in, out;
    cusparseComputeType compute;
    int in_bytes, out_bytes, multiple;
} s24_kind;

enum { S24_BF16 = 0, S24_INT8 = 1 };
static const s24_kind s24_kinds[2] = {
    {CUDA_R_16BF, CUDA_R_16BF, CUSPARSE_COMPUTE_32F, 2, 2, 16},
    {CUDA_R_8I, CUDA_R_32I, CUSPARSE_COMPUTE_32I, 1, 4, 32},
};

/* A sparse weight's kind, from its type as uploaded or as compressed. */
static int kind_of(tram_wtype t) { return t == TRAM_W_S24_INT8 || t == TRAM_W_INT8 ? S24_INT8 : S24_BF16; }

/* The functions tram calls, each typed from its prototype: X(Matmul) is
 * cusparseLtMatmul, called as csl.Matmul (a field may not take the name of
 * the function whose type it takes). */
#define CSL_FUNCTIONS(X)                                                                                           \
    X(Init) X(Destroy) X(GetErrorString) X(DenseDescriptorInit) X(StructuredDescriptorInit) X(MatDescriptorDestroy) \
    X(MatmulDescriptorInit) X(MatmulAlgSelectionInit) X(MatmulAlgSelectionDestroy) X(MatmulPlanInit)               \
    X(MatmulPlanDestroy) X(MatmulGetWorkspace) X(Matmul) X(SpMMAPruneCheck2) X(SpMMACompressedSize2)                \
    X(SpMMACompress2)

typedef struct {
#define CSL_FIELD(f) __typeof__(cusparseLt##f) *f;
    CSL_FUNCTIONS(CSL_FIELD)
#undef CSL_FIELD
} csl_api;

static csl_api csl;
static tram_dlib csl_lib;
static int csl_rc = -1;
static tram_error csl_err;
static pthread_once_t csl_once = PTHREAD_ONCE_INIT;

static void csl_load(void)
{
    static const char *const names[] = {
#define CSL_NAME(f) "cusparseLt" #f,
        CSL_FUNCTIONS(CSL_NAME)
#undef CSL_NAME
    };
    enum { N = sizeof(names) / sizeof(names[0]) };
    void *syms[N];
    csl_rc = tram_dlib_open(&csl_lib, "TRAM_CUSPARSELT", "libcusparseLt.so.0", names, syms, N, &csl_err);
    if (csl_rc)
        return;
    int i = 0;
#define CSL_SET(f) csl.f = (__typeof__(cusparseLt##f) *)syms[i++];
    CSL_FUNCTIONS(CSL_SET)
#undef CSL_SET
}

static int csl_check(tram_cuda_status *st, cusparseStatus_t s, const char *file, int line, const char *call)
{
    return s == CUSPARSE_STATUS_SUCCESS ? 0 : tram_cuda_record(st, file, line, call, csl.GetErrorString(s));
}
#define CSL_CHECK(st, call) csl_check((st), (call), __FILE__, __LINE__, #call)

/* One product shape: descriptors, the default algorithm, the plan. */
typedef struct {
    int kind, m, n, k;  /* m 0: empty slot */
    cusparseLtMatDescriptor_t a, b, c;
    cusparseLtMatmulDescriptor_t mm;
    cusparseLtMatmulAlgSelection_t alg;
    cusparseLtMatmulPlan_t plan;
    int stage;    /* how far the build got: what plan_clear destroys */
} s24_plan;

struct cuda_sparse24 {
    cusparseLtHandle_t handle;
    int max_rows;             /* the most token rows a product gets, rounded up to S24_ROWS_MULTIPLE */
    void *x_pad, *y_pad;      /* [max_rows][widest k] operands, [max_rows][widest m] outputs (bytes: the
                               * widest of either kind) */
    size_t x_bytes, y_bytes;
    s24_plan plans[S24_PLANS];
};

static int round_up(int v, int multiple) { return (v + multiple - 1) / multiple * multiple; }

/* W's descriptor: cols × rows column-major, the 2:4 operand A. */
static int sparse_descriptor(cuda_state *c, cusparseLtMatDescriptor_t *d, int kind, int m, int k)
{
    return CSL_CHECK(&c->st, csl.StructuredDescriptorInit(&c->s24->handle, d, k, m, k, S24_ALIGN,
                                                          s24_kinds[kind].in, CUSPARSE_ORDER_COL,
                                                          CUSPARSELT_SPARSITY_50_PERCENT));
}

int cuda_sparse24_prepare(tram_backend *be, tram_wtype t, int max_rows, tram_error *why)
{
    cuda_state *c = cuda_of(be);
    if (t != TRAM_W_S24 && t != TRAM_W_S24_INT8) {
        tram_fail(why, "type %d is not a 2:4 kind", t);
        return 0;
    }
    pthread_once(&csl_once, csl_load);
    if (csl_rc) {
        tram_fail(why, "%s", csl_err.msg);
        return 0;
    }
    if (!c->s24) {
        cuda_sparse24 *s = (cuda_sparse24 *)calloc(1, sizeof(*s));
        if (!s) {
            tram_fail(why, "out of host memory for cuSPARSELt's plans");
            return 0;
        }
        cusparseStatus_t e = csl.Init(&s->handle);  /* checked: a failure is the answer */
        if (e != CUSPARSE_STATUS_SUCCESS) {
            free(s);
            tram_fail(why, "cusparseLtInit failed: %s", csl.GetErrorString(e));
            return 0;
        }
        c->s24 = s;
    }
    c->s24->max_rows = TRAM_MAX(c->s24->max_rows, round_up(max_rows, S24_ROWS_MULTIPLE));
    return 1;
}

int cuda_sparse24_fits(tram_backend *be, tram_wtype t, int rows, int cols, tram_error *why)
{
    (void)be;
    int multiple = s24_kinds[kind_of(t)].multiple;
    if (rows % multiple || cols % multiple) {
        tram_fail(why, "cuSPARSELt's %s products need rows and columns multiples of %d",
                  t == TRAM_W_S24_INT8 ? "int8" : "bf16", multiple);
        return 0;
    }
    if (t == TRAM_W_S24_INT8 && cols > TRAM_I8_MAX_COLS) {
        tram_fail(why, "more than %d columns could overflow its int32 sums", TRAM_I8_MAX_COLS);
        return 0;
    }
    return 1;
}

/* The padded copies' sizes for a matrix of m rows and k columns. */
static int reserve_padding(cuda_state *c, const s24_kind *kd, int m, int k)
{
    cuda_sparse24 *s = c->s24;
    return cuda_reserve(c, &s->x_pad, &s->x_bytes, (size_t)s->max_rows * k * kd->in_bytes) ||
           cuda_reserve(c, &s->y_pad, &s->y_bytes, (size_t)s->max_rows * m * kd->out_bytes);
}

/* 1 when cuSPARSELt finds the dense w 2:4 in its rows. */
static int is_24(cuda_state *c, const cusparseLtMatDescriptor_t *d, const void *dense)
{
    int *valid = NULL, host = 1;
    if (CUDA_CHECK(&c->st, cudaMallocAsync((void **)&valid, sizeof(int), c->stream)))
        return 0;
    if (!CSL_CHECK(&c->st, csl.SpMMAPruneCheck2(&c->s24->handle, d, 1, CUSPARSE_OPERATION_TRANSPOSE, dense, valid,
                                                c->stream)) &&
        !CUDA_CHECK(&c->st, cudaMemcpyAsync(&host, valid, sizeof(int), cudaMemcpyDeviceToHost, c->stream)))
        CUDA_CHECK(&c->st, cudaStreamSynchronize(c->stream));
    CUDA_CHECK(&c->st, cudaFreeAsync(valid, c->stream));
    return !c->st.failed && host == 0;  /* the library's 0 means valid */
}

void cuda_sparse24_compress(tram_backend *be, tram_weight *w)
{
    cuda_state *c = cuda_of(be);
    if (!c->s24) {
        cuda_fail(be, "a 2:4 weight was uploaded before sparse24_prepare loaded cuSPARSELt");
        return;
    }
    if (!w->data)
        return;  /* the dense upload failed, already recorded */
    int kind = kind_of(w->type);
    tram_error why = {{0}};
    if (!cuda_sparse24_fits(be, kind == S24_INT8 ? TRAM_W_S24_INT8 : TRAM_W_S24, w->rows, w->cols, &why)) {
        cuda_fail(be, "2:4 weight %dx%d: %s", w->rows, w->cols, why.msg);
        return;
    }
    cusparseLtMatDescriptor_t d;
    if (sparse_descriptor(c, &d, kind, w->rows, w->cols))
        return;
    size_t bytes = 0, buffer_bytes = 0;
    void *compressed = NULL, *buffer = NULL;
    if (!is_24(c, &d, w->data)) {
        cuda_fail(be, "a matrix %dx%d loaded as 2:4 sparse has a group of 4 with more than 2 nonzeros", w->rows,
                  w->cols);
    } else if (!CSL_CHECK(&c->st, csl.SpMMACompressedSize2(&c->s24->handle, &d, &bytes, &buffer_bytes)) &&
               !CUDA_CHECK(&c->st, cudaMalloc(&compressed, bytes)) &&
               !CUDA_CHECK(&c->st, cudaMallocAsync(&buffer, buffer_bytes, c->stream)) &&
               !CSL_CHECK(&c->st, csl.SpMMACompress2(&c->s24->handle, &d, 1, CUSPARSE_OPERATION_TRANSPOSE, w->data,
                                                     compressed, buffer, c->stream)) &&
               !reserve_padding(c, &s24_kinds[kind], w->rows, w->cols) &&
               !CUDA_CHECK(&c->st, cudaStreamSynchronize(c->stream))) {
        CUDA_CHECK(&c->st, cudaFree(w->data));
        w->data = compressed;
        w->type = kind == S24_INT8 ? TRAM_W_S24_INT8 : TRAM_W_S24;
        compressed = NULL;
    }
    if (buffer)
        CUDA_CHECK(&c->st, cudaFreeAsync(buffer, c->stream));
    cudaFree(compressed);  /* only when a step failed, already recorded */
    CSL_CHECK(&c->st, csl.MatDescriptorDestroy(&d));
}

static void plan_clear(s24_plan *p)
{
    if (p->stage >= 5)
        csl.MatmulPlanDestroy(&p->plan);
    if (p->stage >= 4)
        csl.MatmulAlgSelectionDestroy(&p->alg);
    const cusparseLtMatDescriptor_t *ds[3] = {&p->a, &p->b, &p->c};
    for (int i = 0; i < p->stage && i < 3; i++)
        csl.MatDescriptorDestroy(ds[i]);
    memset(p, 0, sizeof(*p));
}

/* Builds the plan of an (m, n, k) product, stage by stage (plan_clear
 * undoes the stages reached); its workspace is gemm.cu's: the one stream
 * runs one product at a time. */
static int plan_build(cuda_state *c, s24_plan *p, int kind, int m, int n, int k)
{
    const cusparseLtHandle_t *h = &c->s24->handle;
    const s24_kind *kd = &s24_kinds[kind];
    p->kind = kind, p->m = m, p->n = n, p->k = k;
    if (sparse_descriptor(c, &p->a, kind, m, k))
        return -1;
    p->stage = 1;
    if (CSL_CHECK(&c->st, csl.DenseDescriptorInit(h, &p->b, k, n, k, S24_ALIGN, kd->in, CUSPARSE_ORDER_COL)))
        return -1;
    p->stage = 2;
    if (CSL_CHECK(&c->st, csl.DenseDescriptorInit(h, &p->c, m, n, m, S24_ALIGN, kd->out, CUSPARSE_ORDER_COL)))
        return -1;
    p->stage = 3;
    if (CSL_CHECK(&c->st, csl.MatmulDescriptorInit(h, &p->mm, CUSPARSE_OPERATION_TRANSPOSE,
                                                   CUSPARSE_OPERATION_NON_TRANSPOSE, &p->a, &p->b, &p->c, &p->c,
                                                   kd->compute)) ||
        CSL_CHECK(&c->st, csl.MatmulAlgSelectionInit(h, &p->alg, &p->mm, CUSPARSELT_MATMUL_ALG_DEFAULT)))
        return -1;
    p->stage = 4;
    if (CSL_CHECK(&c->st, csl.MatmulPlanInit(h, &p->plan, &p->mm, &p->alg)))
        return -1;
    p->stage = 5;
    size_t ws = 0;
    if (CSL_CHECK(&c->st, csl.MatmulGetWorkspace(h, &p->plan, &ws)))
        return -1;
    if (ws > CUDA_GEMM_WORKSPACE)
        return tram_cuda_record(&c->st, __FILE__, __LINE__, "cusparseLtMatmulGetWorkspace",
                                "the plan wants more workspace than the GEMMs' 32 MiB");
    return 0;
}

/* The cached plan of a kind's (m, n, k): its slot's, or a new one in its
 * place. */
static s24_plan *plan_for(cuda_state *c, int kind, int m, int n, int k)
{
    uint32_t h = ((uint32_t)m * 73856093u) ^ ((uint32_t)n * 19349663u) ^ ((uint32_t)k * 83492791u) ^
                 ((uint32_t)kind * 2654435761u);
    s24_plan *p = &c->s24->plans[h % S24_PLANS];
    if (p->m && p->kind == kind && p->m == m && p->n == n && p->k == k)
        return p;
    plan_clear(p);
    if (!plan_build(c, p, kind, m, n, k))
        return p;
    plan_clear(p);
    return NULL;
}

/* Whether a product can read x and write y in place: a token count the
 * kind takes, and addresses as aligned as the descriptors say. */
static int runs_in_place(const s24_kind *kd, const void *x, const void *y, int n)
{
    return n % kd->multiple == 0 && ((uintptr_t)x | (uintptr_t)y) % (2 * S24_ALIGN) == 0;  /* 32 bytes: safe for both */
}

/* y[n][rows] = x[n][cols] · Wᵀ in w's kind: bf16 from bf16, or the int32
 * sums from int8 codes (alpha and beta are f32 for every compute type; an
 * int32 sum is scaled by 1, which the GPU check proves exact). */
void cuda_sparse24_matmul(tram_backend *be, void *y, const void *x, const tram_weight *w, int n)
{
    cuda_state *c = cuda_of(be);
    cuda_sparse24 *s = c->s24;
    int kind = kind_of(w->type);
    const s24_kind *kd = &s24_kinds[kind];
    int direct = runs_in_place(kd, x, y, n), np = direct ? n : round_up(n, kd->multiple);
    if (!direct && np > s->max_rows) {
        cuda_fail(be, "2:4 matmul of %d rows: more than the %d prepared", n, s->max_rows);
        return;
    }
    s24_plan *p = plan_for(c, kind, w->rows, np, w->cols);
    if (!p)
        return;
    const void *in = direct ? x : s->x_pad;
    void *out = direct ? y : s->y_pad;
    if (!direct && CUDA_CHECK(&c->st, cudaMemcpyAsync(s->x_pad, x, (size_t)n * w->cols * kd->in_bytes,
                                                      cudaMemcpyDeviceToDevice, c->stream)))
        return;
    const float one = 1.0f, zero = 0.0f;
    if (CSL_CHECK(&c->st, csl.Matmul(&s->handle, &p->plan, &one, w->data, in, &zero, out, out, c->workspace,
                                     &c->stream, 1)) ||
        direct)
        return;
    CUDA_CHECK(&c->st, cudaMemcpyAsync(y, s->y_pad, (size_t)n * w->rows * kd->out_bytes,
                                       cudaMemcpyDeviceToDevice, c->stream));
}

void cuda_sparse24_free(cuda_state *c)
{
    cuda_sparse24 *s = c->s24;
    if (!s)
        return;
    for (int i = 0; i < S24_PLANS; i++)
        plan_clear(&s->plans[i]);
    cudaFree(s->x_pad);
    cudaFree(s->y_pad);
    csl.Destroy(&s->handle);
    free(s);
    c->s24 = NULL;
}
