/* variants.cu — which numbered variant each kernel family runs
 * (kernels/variants.h).  The families' files read it through cuda_variant(). */
#include "kernels/cuda/cuda_impl.cuh"

extern "C" int tram_cuda_set_kernel_variants(tram_backend *be, const tram_kernel_variants *kv, tram_error *err)
{
    cuda_state *c = cuda_of(be);
    tram_kernel_variants chosen = {{0}};
    for (int f = 0; f < TRAM_KERNEL_FAMILIES; f++) {
        int v = tram_kernel_variant(kv, (tram_kernel_family)f);
        if (v > tram_kernel_family_max((tram_kernel_family)f))
            return tram_fail(err, "cuda backend: %s kernels have variants 1..%d, not %d",
                             tram_kernel_family_name((tram_kernel_family)f),
                             tram_kernel_family_max((tram_kernel_family)f), v);
        chosen.v[f] = v;
    }
    c->variants = chosen;
    cuda_graphs_drop(c);
    return 0;
}
