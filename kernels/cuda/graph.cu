/* graph.cu — CUDA graphs of decode steps, one per padded batch size.  A decode
 * step is ~10 launches per layer; replaying them as one graph removes the
 * launch gaps that dominate small batches.  The engine captures a bucket the
 * first time it meets it and replays afterwards (cuda.h says the rules). */
#include "kernels/cuda/cuda_impl.cuh"

static int graph_error(cuda_state *c, tram_error *err)
{
    c->st.failed = 0;
    return tram_fail(err, "%s", c->st.err.msg);
}

static int slot_of(int bucket, tram_error *err)
{
    if (tram_cuda_graph_bucket(bucket) != bucket)
        return tram_fail(err, "cuda backend: %d is not a graph bucket (a power of two up to %d)", bucket,
                         1 << (TRAM_CUDA_GRAPH_BUCKETS - 1));
    return tram_cuda_graph_slot(bucket);
}

void cuda_graphs_drop(cuda_state *c)
{
    for (int i = 0; i < TRAM_CUDA_GRAPH_BUCKETS; i++)
        if (c->graphs[i]) {
            CUDA_CHECK(&c->st, cudaGraphExecDestroy(c->graphs[i]));
            c->graphs[i] = NULL;
        }
}

extern "C" int tram_cuda_graph_begin(tram_backend *be, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    if (c->st.failed)
        return graph_error(c, err);
    /* Thread-local mode: another thread's unsafe calls do not break us. */
    if (CUDA_CHECK(&c->st, cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal)))
        return graph_error(c, err);
    return 0;
}

extern "C" int tram_cuda_graph_end(tram_backend *be, int bucket, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    cudaGraph_t graph = NULL;
    int slot = slot_of(bucket, err);
    /* Always end the capture, so a failed one leaves the stream usable. */
    int rc = CUDA_CHECK(&c->st, cudaStreamEndCapture(c->stream, &graph));
    if (slot < 0) {
        if (graph)
            cudaGraphDestroy(graph);
        return -1;
    }
    if (!rc && !c->st.failed) {
        if (c->graphs[slot])
            CUDA_CHECK(&c->st, cudaGraphExecDestroy(c->graphs[slot]));
        c->graphs[slot] = NULL;
        CUDA_CHECK(&c->st, cudaGraphInstantiate(&c->graphs[slot], graph, 0));
    }
    if (graph)
        cudaGraphDestroy(graph);
    return c->st.failed ? graph_error(c, err) : 0;
}

extern "C" int tram_cuda_graph_ready(tram_backend *be, int bucket)
{
    int b = tram_cuda_graph_bucket(bucket);
    return b == bucket && cuda_of(be)->graphs[tram_cuda_graph_slot(b)] != NULL;
}

extern "C" int tram_cuda_graph_replay(tram_backend *be, int bucket, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    int slot = slot_of(bucket, err);
    if (slot < 0)
        return -1;
    if (!c->graphs[slot])
        return tram_fail(err, "cuda backend: no graph captured for batch size %d", bucket);
    if (CUDA_CHECK(&c->st, cudaGraphLaunch(c->graphs[slot], c->stream)))
        return graph_error(c, err);
    return 0;
}
