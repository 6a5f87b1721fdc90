// The kernels' own work sharing for parallel_for and parallel_range (blas.h, common.h): chunks of a loop are
// claimed one at a time from a shared counter by the calling thread and by helper threads that wait between
// loops (a 100 us spin that yields the core, then sleep; no spin after contention, work_sharing.cc). The calling thread never waits for a helper that has not started: it wakes the helpers and starts on the
// first chunk at once, takes every chunk nobody else has claimed, and at the end waits only for chunks a helper is
// running. So a helper that comes late (its core busy with another process, or asleep for longer than the loop
// lasts) costs the loop only the wake-up call (~2 us), and one that comes in time halves it.
//
// Why not an OpenMP region: libgomp's team barrier makes the calling thread wait for every thread of the team to
// arrive. With OMP_WAIT_POLICY=PASSIVE (core/omp_wait.h) a sleeping worker takes 10-15 us to wake even on an idle
// machine, and a scheduler time slice (milliseconds) when another process holds the other core, so llama2c at 2
// threads ran slower than at 1 (docs/benchmarks.md, 2026-11-24). The regions that remain OpenMP (OpenBLAS blocks,
// Conv tiles, oneDNN) are large ones.
//
// One case still costs: a helper preempted while it holds a chunk (another process took its core) makes the caller
// wait for a scheduler slice. When the caller's wait for the last chunks is far longer than its own chunks took,
// the cores are taken to be contended and loops run on the calling thread alone for the next 50 ms (then helpers
// are tried again). digits-vit at 2 threads on the loaded machine (load 5.5, 8 alternating rounds of 20 forwards,
// 2026-11-25): 15.09 ms median without this, 14.19 with it, 15.05 at 1 thread.
//
// Results never depend on which thread runs a chunk (callers' chunks are independent: elementwise loops, rows of
// a GEMM), so they stay bitwise the same at every thread count. A loop started inside another loop's chunk, inside
// an OpenMP region, or while another thread is using the helpers (calibration runs samples side by side) runs on
// the calling thread alone.
#pragma once

#include <cstdint>

namespace qtool::runtime::kernels {

// Runs body(ctx, c) for every c in [0, chunks), on the calling thread and up to threads - 1 helpers; returns when
// all have run. body must not throw.
void share_chunks(int64_t chunks, int threads, void (*body)(void*, int64_t), void* ctx);

// True on a thread running a chunk of share_chunks or inside an OpenMP region: a loop there must not fan out again.
bool inside_parallel_loop();

}  // namespace qtool::runtime::kernels
