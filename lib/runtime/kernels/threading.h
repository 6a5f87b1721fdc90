// When a kernel's loop is worth more than one thread: the one minimum-work rule every compute kernel asks
// (threads_for, threads_for_macs; parallel_range's grain and parallel_for's callers use it). Since 2026-11-25
// parallel_for and parallel_range share chunks with helper threads (work_sharing.h) instead of opening OpenMP
// regions, and the caller no longer waits for a helper's wake-up; the constants below were sized for OpenMP's
// wake-up and were not lowered (no quiet machine to measure on), so they are conservative for those loops.
//
// A region is not free. qtool runs libgomp with OMP_WAIT_POLICY=PASSIVE (core/omp_wait.h): idle workers
// sleep, so every region pays a futex wake-up and the wait for the woken thread to be scheduled. Measured
// with scripts/bench_omp_wake.sh on the 2-core development machine (docs/interpreter.md, "Parallel
// regions"): a region costs about 11-15 us net whatever its size; spinning instead (GOMP_SPINCOUNT,
// ACTIVE) costs less only on an idle machine and several times more as soon as other processes want the
// cores, so the policy stays PASSIVE and regions must be worth a wake-up. Splitting S microseconds of
// serial work over 2 threads saves S/2, so a region pays from S = 2 x wake-up, about 25 us: 2^17 cheap
// elementwise operations (y = a*x+b runs at 0.11 ns per element in cache, ~15 us; the kernels' loops with
// broadcasting or strided indexing run 1.5-3x slower) or 2^19 GEMM multiply-adds (one-thread OpenBLAS on
// 64x64x128: 13-15 per ns, ~36 us). Below that, the loop runs on the calling thread and wakes nobody.
//
// The rule only picks the thread count, never how work is cut into blocks (sgemm's blocks, Conv tiles
// depend on the shape alone), so results stay bitwise the same at every thread count.
#pragma once

#include <cstdint>

namespace qtool::runtime::kernels {

// Cheap elementwise operations (about a load, an arithmetic op and a store) one region must hold.
inline constexpr int64_t kParallelMinWork = int64_t{1} << 17;
// GEMM-class multiply-adds one region must hold.
inline constexpr int64_t kParallelMinMacs = int64_t{1} << 19;
// Multiply-adds of the register-tiled direct GEMM (gemm_direct.h) one region must hold: it runs at 43-50 per ns
// (single thread, 2026-11-25), about three times OpenBLAS's figure above, so 2^21 is ~45 us, again about twice the
// wake-up. llama2c's [256,64]·[64,64] projections (2^20, ~22 us) stay on the calling thread.
inline constexpr int64_t kParallelMinDirectMacs = int64_t{1} << 21;
// An element of a transcendental function (exp, erf, tanh, sigmoid, sin, ...) costs about this many cheap
// operations: callers scale their element count by it.
inline constexpr int64_t kTranscendentalCost = 8;

// Threads worth using for `work` cheap operations spread over `regions` parallel regions.
inline int threads_for(int64_t work, int threads, int regions = 1) {
  return work < kParallelMinWork * regions ? 1 : threads;
}

// Threads worth using for `macs` GEMM-class multiply-adds spread over `regions` parallel regions.
inline int threads_for_macs(int64_t macs, int threads, int regions = 1) {
  return macs < kParallelMinMacs * regions ? 1 : threads;
}

// Threads worth using for `macs` multiply-adds of the direct GEMM.
inline int threads_for_direct_macs(int64_t macs, int threads) { return macs < kParallelMinDirectMacs ? 1 : threads; }

}  // namespace qtool::runtime::kernels
