/* ranks.c — the rank threads of tensor parallelism (see ranks.h). */
#include "engine/ranks.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cpu/quota.h"
#include "kernels/cuda/cuda.h"
#include "models/shard.h"

typedef struct {
    tram_ranks *owner;
    int rank;
    pthread_t thread;
    int started;
    uint64_t seen;        /* the last job generation this rank took */
    int rc;
    tram_error err;
} rank_slot;

struct tram_ranks {
    int world_size;
    tram_cpu_group *group;                 /* CPU ranks' all-reduce; NULL on CUDA or alone */
    tram_backend *be[TRAM_RANKS_MAX];
    tram_model *model[TRAM_RANKS_MAX];
    rank_slot slot[TRAM_RANKS_MAX];

    /* the job every rank runs: guarded by lock */
    pthread_mutex_t lock;
    pthread_cond_t go, done;
    uint64_t generation;
    int pending, quit;
    tram_rank_fn fn;
    void *ctx;
};

int tram_ranks_check(const tram_ranks_spec *spec, const tram_model_config *c, tram_error *err)
{
    int world = spec->world_size;
    if (world < 1 || world > TRAM_RANKS_MAX)
        return tram_fail(err, "tensor parallel size must be in [1, %d], got %d", TRAM_RANKS_MAX, world);
    if (tram_shard_check(c, world, err))
        return -1;
#ifdef TRAM_CUDA
    tram_error why;
    if (!strcmp(spec->device, "cuda") && world > 1 && tram_cuda_probe(world - 1, &why))
        return tram_fail(err, "%d ranks need %d GPUs, one each (%s)", world, world, why.msg);
#endif
    return 0;
}

/* ---------------------------------------------------------------- threads */

static void run_slot(tram_ranks *r, rank_slot *t)
{
    t->rc = r->fn(r, t->rank, r->ctx, &t->err);
}

static void *rank_main(void *arg)
{
    rank_slot *t = arg;
    tram_ranks *r = t->owner;
    if (r->be[t->rank]->bind_thread)
        r->be[t->rank]->bind_thread(r->be[t->rank]);
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (t->seen == r->generation)
            pthread_cond_wait(&r->go, &r->lock);
        t->seen = r->generation;
        if (r->quit)
            break;
        pthread_mutex_unlock(&r->lock);
        run_slot(r, t);
        pthread_mutex_lock(&r->lock);
        if (--r->pending == 0)
            pthread_cond_signal(&r->done);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

int tram_ranks_run(tram_ranks *r, tram_rank_fn fn, void *ctx, tram_error *err)
{
    if (r->world_size == 1)
        return fn(r, 0, ctx, err);
    pthread_mutex_lock(&r->lock);
    r->fn = fn;
    r->ctx = ctx;
    r->pending = r->world_size - 1;
    r->generation++;
    pthread_cond_broadcast(&r->go);
    pthread_mutex_unlock(&r->lock);
    run_slot(r, &r->slot[0]);
    pthread_mutex_lock(&r->lock);
    while (r->pending > 0)
        pthread_cond_wait(&r->done, &r->lock);
    pthread_mutex_unlock(&r->lock);
    for (int k = 0; k < r->world_size; k++)
        if (r->slot[k].rc) {
            *err = r->slot[k].err;
            return -1;
        }
    return 0;
}

static int start_threads(tram_ranks *r, tram_error *err)
{
    pthread_mutex_init(&r->lock, NULL);
    pthread_cond_init(&r->go, NULL);
    pthread_cond_init(&r->done, NULL);
    for (int k = 0; k < r->world_size; k++)
        r->slot[k] = (rank_slot){.owner = r, .rank = k};
    for (int k = 1; k < r->world_size; k++) {
        if (pthread_create(&r->slot[k].thread, NULL, rank_main, &r->slot[k]))
            return tram_fail(err, "cannot start the thread of tensor-parallel rank %d", k);
        r->slot[k].started = 1;
    }
    return 0;
}

static void stop_threads(tram_ranks *r)
{
    pthread_mutex_lock(&r->lock);
    r->quit = 1;
    r->generation++;
    pthread_cond_broadcast(&r->go);
    pthread_mutex_unlock(&r->lock);
    for (int k = 1; k < r->world_size; k++)
        if (r->slot[k].started)
            pthread_join(r->slot[k].thread, NULL);
    pthread_cond_destroy(&r->go);
    pthread_cond_destroy(&r->done);
    pthread_mutex_destroy(&r->lock);
}

/* ---------------------------------------------------------------- backends */

/* Each CPU rank gets an equal share of the usable CPUs (at least one). */
static int open_cpu(tram_ranks *r, int num_threads, tram_error *err)
{
    int cores = num_threads > 0 ? num_threads : tram_cpu_usable();
    int share = TRAM_MAX(1, cores / r->world_size);
    if (r->world_size == 1)
        return tram_backend_cpu_create(&r->be[0], num_threads, err);
    if (tram_cpu_group_create(&r->group, r->world_size, err))
        return -1;
    for (int k = 0; k < r->world_size; k++)
        if (tram_backend_cpu_create_rank(&r->be[k], share, r->group, k, err))
            return -1;
    return 0;
}

#ifdef TRAM_CUDA
static int open_cuda(tram_ranks *r, const tram_kernel_variants *kernels, tram_error *err)
{
    if (r->world_size == 1 ? tram_backend_cuda_create(&r->be[0], 0, err)
                           : tram_backend_cuda_create_ranks(r->be, r->world_size, err))
        return -1;
    for (int k = 0; k < r->world_size; k++)
        if (kernels && tram_cuda_set_kernel_variants(r->be[k], kernels, err))
            return -1;
    return 0;
}
#endif

static int open_backends(tram_ranks *r, const tram_ranks_spec *spec, tram_error *err)
{
    if (!strcmp(spec->device, "cpu"))
        return open_cpu(r, spec->num_threads, err);
#ifdef TRAM_CUDA
    if (!strcmp(spec->device, "cuda"))
        return open_cuda(r, spec->kernels, err);
#endif
    if (!strcmp(spec->device, "cuda"))
        return tram_fail(err, "device cuda: this binary was built without CUDA (build bin/tram-cuda "
                              "with `make cuda`)");
    return tram_fail(err, "unknown device '%s' (expected cpu or cuda)", spec->device);
}

int tram_ranks_create(tram_ranks **out, const tram_ranks_spec *spec, tram_error *err)
{
    if (spec->world_size < 1 || spec->world_size > TRAM_RANKS_MAX)
        return tram_fail(err, "tensor parallel size must be in [1, %d], got %d", TRAM_RANKS_MAX,
                         spec->world_size);
    tram_ranks *r = tram_calloc(1, sizeof(*r), err);
    if (!r)
        return -1;
    r->world_size = spec->world_size;
    if (open_backends(r, spec, err) || start_threads(r, err)) {
        tram_ranks_destroy(r);
        return -1;
    }
    if (r->be[0]->bind_thread)
        r->be[0]->bind_thread(r->be[0]);
    *out = r;
    return 0;
}

void tram_ranks_destroy(tram_ranks *r)
{
    if (!r)
        return;
    if (r->slot[0].owner)
        stop_threads(r);
    for (int k = 0; k < r->world_size; k++) {
        tram_model_destroy(r->model[k]);
        if (r->be[k])
            r->be[k]->destroy(r->be[k]);
    }
    tram_cpu_group_destroy(r->group);
    free(r);
}

int tram_ranks_world_size(const tram_ranks *r) { return r->world_size; }
tram_backend *tram_ranks_backend(const tram_ranks *r, int rank) { return r->be[rank]; }
tram_model *tram_ranks_model(const tram_ranks *r, int rank) { return r->model[rank]; }

/* ---------------------------------------------------------------- jobs */

typedef struct {
    tram_model_file *file;
    const tram_model_limits *lim;
} load_job;

static int load_rank(tram_ranks *r, int rank, void *ctx, tram_error *err)
{
    load_job *job = ctx;
    return tram_model_create(&r->model[rank], job->file, r->be[rank], job->lim, err);
}

int tram_ranks_load(tram_ranks *r, tram_model_file *f, const tram_model_limits *lim, tram_error *err)
{
    load_job job = {.file = f, .lim = lim};
    return tram_ranks_run(r, load_rank, &job, err);
}

typedef struct {
    const tram_batch *batch;
    float *logits;
} forward_job;

static int forward_rank(tram_ranks *r, int rank, void *ctx, tram_error *err)
{
    forward_job *job = ctx;
    return tram_model_forward(r->model[rank], job->batch, rank == 0 ? job->logits : NULL, err);
}

int tram_ranks_forward(tram_ranks *r, const tram_batch *b, float *logits, tram_error *err)
{
    forward_job job = {.batch = b, .logits = logits};
    return tram_ranks_run(r, forward_rank, &job, err);
}

static int resize_rank(tram_ranks *r, int rank, void *ctx, tram_error *err)
{
    return tram_model_resize_kv(r->model[rank], *(const int *)ctx, err);
}

int tram_ranks_resize_kv(tram_ranks *r, int num_blocks, tram_error *err)
{
    return tram_ranks_run(r, resize_rank, &num_blocks, err);
}
