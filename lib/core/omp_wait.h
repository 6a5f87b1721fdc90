// OpenMP wait policy and OpenBLAS thread count for processes qtool owns (the CLI, test and benchmark programs).
//
// GNU OpenMP's default (OMP_WAIT_POLICY unset) makes idle worker threads spin for about 300000
// iterations after each parallel region. The interpreter runs several short regions per node with
// serial work between them, so on a machine busier than its cores (a CI runner, a laptop compiling)
// the spinning workers take the CPU from the thread doing the work: mobilenetv2 was measured at 2.5 s
// instead of 40 ms. Sleep-waiting (PASSIVE) costs a futex wake per region instead.
//
// OpenBLAS's pthread build (Debian's default libopenblas.so.0) starts nproc-1 worker threads in its library
// constructor unless OPENBLAS_NUM_THREADS (or GOTO_/OMP_NUM_THREADS) says 1, and they spin on sched_yield for 2^28
// cycles (~0.1 s) before sleeping. qtool never uses them (openblas_set_num_threads(1), runtime/kernels/blas.cc: its
// threads are its own), but on a machine busier than its cores a short run shares them with these workers
// (docs/benchmarks.md, 2026-11-25). OPENBLAS_NUM_THREADS=1 starts none. Debian's serial OpenBLAS would start none
// either, but it is not safe to call from two threads at once (tests/kernels/openblas_build_test.cc fails about one
// run in ten with it), and qtool's parallel loops do that.
//
// Both libraries read the variables in their constructors, before main() runs, so setting them inside the
// process is too late (even from the executable's .preinit_array: libc's own initialisation, which comes after it,
// resets the environment); the only reliable way is to re-execute the program with the variables set.
// OpenBLAS also picks its kernels in its constructor, by the CPU's model: a CPU newer than the library (Debian 12's
// 0.3.21 on a Sapphire Rapids VM) gets its Prescott (SSE3) fallback, 4-5x slower than the AVX-512 kernels the CPU
// runs (omp_wait.cc); then OPENBLAS_CORETYPE names the kernels the CPU's features allow.
// An explicit OMP_WAIT_POLICY or GOMP_SPINCOUNT, and an explicit OPENBLAS_NUM_THREADS or OPENBLAS_CORETYPE, are
// honoured.
#pragma once

namespace qtool::core {

// Sets OMP_WAIT_POLICY=PASSIVE when neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set, and OPENBLAS_NUM_THREADS=1
// when it is not set (on more than one core), and OPENBLAS_CORETYPE when OpenBLAS fell back to Prescott on a CPU
// with AVX2 or AVX-512; when it set any, replaces the process with a fresh copy of itself
// (execv of /proc/self/exe with the same argv), so the libraries start with them. Returns normally when the
// environment already decides, or when re-executing is impossible (then the process keeps the libraries'
// defaults). Call first thing in main(), before any thread of the program's own exists.
void adopt_thread_environment(char** argv);

}  // namespace qtool::core
