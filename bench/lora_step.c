/* lora_step.c — one decode step of --seqs sequences on the CPU, the base
 * model alone against the same step with each sequence on its own random
 * rank-16 adapter (all seven projections, --max-loras slots), without the
 * server around it (bench/lora.py measures that).  The two kinds of step
 * alternate, so that a change of the machine's load reaches both alike;
 * prints the median of each and the overhead.  It also prints an FNV-1a
 * hash of every logit the adapted steps produced: two builds whose LoRA op
 * sums the same way print the same hash.
 *   build/bench/lora_step [-m MODEL] [-t THREADS] [--seqs N] [--steps N] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "models/lora.h"
#include "models/model.h"

enum { RANK = 16, BLOCK = 16, PROMPT = 32, MAX_SEQS = 64 };

typedef struct {
    const char *model;
    int threads, seqs, steps;
} options;

static int parse(int argc, char **argv, options *o)
{
    *o = (options){"models/SmolLM2-135M-Instruct.Q4_1.gguf", 2, 16, 40};
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-m"))
            o->model = argv[i + 1];
        else if (!strcmp(argv[i], "-t"))
            o->threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seqs"))
            o->seqs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--steps"))
            o->steps = atoi(argv[i + 1]);
        else
            return -1;
    }
    return o->seqs >= 1 && o->seqs <= MAX_SEQS && o->steps >= 1 && o->threads >= 1 ? 0 : -1;
}

/* Random factors of magnitude 2^-7..2^-6, as bench/lora.py writes them. */
static float *random_factor(size_t n, unsigned *s)
{
    float *f = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        *s = *s * 1664525u + 1013904223u;
        f[i] = (*s >> 31 ? -1.0f : 1.0f) * (1.0f + (float)(*s >> 8 & 0x7f) / 128.0f) / 128.0f;
    }
    return f;
}

static tram_lora_adapter *random_adapter(const tram_model_config *c, unsigned seed)
{
    tram_lora_adapter *a = calloc(1, sizeof(*a));
    size_t k = (size_t)c->n_layers * TRAM_LORA_N_TARGETS;
    *a = (tram_lora_adapter){.rank = RANK, .alpha = 2 * RANK, .scale = 2.0f, .n_layers = c->n_layers,
                             .targets = (1u << TRAM_LORA_N_TARGETS) - 1};
    a->a = calloc(k, sizeof(float *));
    a->b = calloc(k, sizeof(float *));
    for (size_t i = 0; i < k; i++) {
        int in, out;
        tram_lora_target_dims(c, (tram_lora_target)(i % TRAM_LORA_N_TARGETS), &in, &out);
        a->a[i] = random_factor((size_t)RANK * in, &seed);
        a->b[i] = random_factor((size_t)out * RANK, &seed);
    }
    return a;
}

static void free_adapter(tram_lora_adapter *a, const tram_model_config *c)
{
    for (int i = 0; i < c->n_layers * TRAM_LORA_N_TARGETS; i++) {
        free(a->a[i]);
        free(a->b[i]);
    }
    free(a->a);
    free(a->b);
    free(a);
}

/* Sequence s owns blocks [s * per_seq, (s + 1) * per_seq). */
typedef struct {
    int32_t ids[MAX_SEQS * PROMPT], pos[MAX_SEQS * PROMPT], slots[MAX_SEQS * PROMPT];
    int32_t qstart[MAX_SEQS + 1], lens[MAX_SEQS], tables[MAX_SEQS * 4], rows[MAX_SEQS], lora[MAX_SEQS];
    tram_batch b;
} step_batch;

/* n tokens of every sequence from position start; adapted: sequence s on
 * slot s, else the base alone. */
static void fill(step_batch *sb, int seqs, int n, int start, int adapted)
{
    tram_batch *b = &sb->b;
    *b = (tram_batch){.num_tokens = seqs * n, .num_seqs = seqs, .token_ids = sb->ids, .positions = sb->pos,
                      .slot_mapping = sb->slots, .query_start = sb->qstart, .seq_lens = sb->lens,
                      .block_tables = sb->tables, .max_blocks_per_seq = 4, .logits_rows = sb->rows,
                      .num_logits = seqs, .seq_lora = adapted ? sb->lora : NULL};
    for (int s = 0; s < seqs; s++) {
        for (int j = 0; j < 4; j++)
            sb->tables[s * 4 + j] = s * 4 + j;
        for (int i = 0; i < n; i++) {
            int t = s * n + i, p = start + i;
            sb->ids[t] = 100 + (s * 31 + p * 7) % 1000;
            sb->pos[t] = p;
            sb->slots[t] = sb->tables[s * 4 + p / BLOCK] * BLOCK + p % BLOCK;
        }
        sb->qstart[s + 1] = (s + 1) * n;
        sb->lens[s] = start + n;
        sb->rows[s] = (s + 1) * n - 1;
        sb->lora[s] = s;
    }
}

static double cpu_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211u;
    return h;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The prompts adapted, then alternating decode steps at position PROMPT. */
static int run(tram_model *m, const options *o, tram_error *err)
{
    int vocab = tram_model_config_of(m)->vocab_size;
    step_batch *sb = calloc(1, sizeof(*sb));
    float *logits = malloc(sizeof(float) * o->seqs * vocab);
    double *base = malloc(sizeof(double) * o->steps), *adapted = malloc(sizeof(double) * o->steps);
    double *base_cpu = malloc(sizeof(double) * o->steps), *adapted_cpu = malloc(sizeof(double) * o->steps);
    uint64_t h = 14695981039346656037u;
    fill(sb, o->seqs, PROMPT, 0, 1);
    int rc = tram_model_forward(m, &sb->b, logits, err);
    h = fnv(h, logits, sizeof(float) * o->seqs * vocab);
    for (int i = 0; !rc && i < 2 * o->steps; i++) {
        fill(sb, o->seqs, 1, PROMPT, i % 2);
        double t0 = tram_now(), c0 = cpu_seconds();
        rc = tram_model_forward(m, &sb->b, logits, err);
        (i % 2 ? adapted : base)[i / 2] = tram_now() - t0;
        (i % 2 ? adapted_cpu : base_cpu)[i / 2] = cpu_seconds() - c0;
        if (i % 2)
            h = fnv(h, logits, sizeof(float) * o->seqs * vocab);
    }
    if (!rc) {
        double mb = median(base, o->steps) * 1e3, ma = median(adapted, o->steps) * 1e3;
        double cb = median(base_cpu, o->steps) * 1e3, ca = median(adapted_cpu, o->steps) * 1e3;
        printf("%d sequences, %d threads: base %.2f ms/step (CPU %.2f ms), %d adapters %.2f ms/step (CPU %.2f ms), "
               "overhead %+.1f %%\n", o->seqs, o->threads, mb, cb, o->seqs, ma, ca, (ma / mb - 1) * 100);
        printf("logits hash %016llx\n", (unsigned long long)h);
    }
    TRAM_FREE_ALL(sb, logits, base, adapted, base_cpu, adapted_cpu);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: lora_step [-m MODEL] [-t THREADS] [--seqs 1..%d] [--steps N]\n", MAX_SEQS);
        return 2;
    }
    tram_error err;
    tram_model_file *f;
    tram_backend *be = NULL;
    tram_model *m = NULL;
    if (tram_model_file_open(&f, o.model, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    const tram_model_config *c = tram_model_file_config(f);
    tram_model_limits lim = {.max_tokens = o.seqs * PROMPT, .max_seqs = o.seqs, .max_blocks_per_seq = 4,
                             .num_blocks = o.seqs * 4, .block_size = BLOCK, .weight_type = TRAM_W_F32,
                             .max_loras = o.seqs, .max_lora_rank = RANK};
    int rc = tram_backend_cpu_create(&be, o.threads, &err) || tram_model_create(&m, f, be, &lim, &err);
    for (int s = 0; !rc && s < o.seqs; s++) {
        tram_lora_adapter *a = random_adapter(c, 1u + (unsigned)s);
        rc = tram_model_lora_load(m, s, a, &err);
        free_adapter(a, c);
    }
    rc = rc || run(m, &o, &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    if (m)
        tram_model_destroy(m);
    if (be)
        be->destroy(be);
    tram_model_file_close(f);
    return rc ? 1 : 0;
}
