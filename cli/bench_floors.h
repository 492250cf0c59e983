/* bench_floors.h — the machine's floors, measured in the same run as the
 * engine so that "of peak" compares like with like on a busy machine:
 * OpenBLAS's sgemm peak, memcpy and STREAM-triad bandwidth.  0 when memory
 * for the measurement cannot be had (err says why). */
#ifndef TRAM_CLI_BENCH_FLOORS_H
#define TRAM_CLI_BENCH_FLOORS_H

#include <stddef.h>

#include "kernels/base.h"

/* FLOP/s of large single-threaded sgemms, one per thread on its rows. */
double tram_bench_sgemm_peak(int threads, tram_error *err);
/* bytes (read + written) per second of one large memcpy */
double tram_bench_copy_bandwidth(tram_error *err);
/* Bytes of the last-level cache (0 where the C library cannot say). */
size_t tram_bench_llc_bytes(void);
/* bytes per second of the triad on `threads` threads, over arrays each at
 * least twice the last-level cache (some CPUs have 480 MiB of L3) */
double tram_bench_triad_bandwidth(int threads, tram_error *err);

#endif
