// OpenMP wait policy for processes qtool owns (the CLI, test and benchmark programs).
//
// GNU OpenMP's default (OMP_WAIT_POLICY unset) makes idle worker threads spin for about 300000
// iterations after each parallel region. The interpreter runs several short regions per node with
// serial work between them, so on a machine busier than its cores (a CI runner, a laptop compiling)
// the spinning workers take the CPU from the thread doing the work: mobilenetv2 was measured at 2.5 s
// instead of 40 ms. Sleep-waiting (PASSIVE) costs a futex wake per region instead.
//
// libgomp reads the variables in its library constructor, before main() runs, so setting them inside
// the process is too late; the only reliable way is to re-execute the program with the variable set.
// An explicit OMP_WAIT_POLICY or GOMP_SPINCOUNT in the environment is honoured (nothing happens).
#pragma once

namespace qtool::core {

// When neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT is set: sets OMP_WAIT_POLICY=PASSIVE and replaces the
// process with a fresh copy of itself (execv of /proc/self/exe with the same argv), so libgomp starts
// with it. Returns normally when the environment already decides, or when re-executing is impossible
// (then the process keeps libgomp's default). Call first thing in main(), before any thread exists.
void adopt_passive_omp_wait(char** argv);

}  // namespace qtool::core
