// A CPU emulation of a one-dimensional CUDA launch, to run device code (device/portable.h) on the host.
//
// emulate_launch(blocks, threads, shared, phase_1, phase_2, ...) runs, for each block in turn, every phase for
// every thread of the block: phase k of all threads completes before phase k + 1 of any thread starts, which is
// what a __syncthreads() between the phases guarantees on the device. `shared` is the block's shared memory, one
// array per block, filled with a garbage byte pattern before each block starts: the device does not zero shared
// memory, so a kernel that forgets to initialise it fails its emulated test.
// Threads run one after another, so an atomic is a plain read-modify-write here; what the emulation checks is the
// per-thread arithmetic, the partitioning of the data over the grid and the reductions, not the memory model.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>
#include <span>
#include <vector>

#include "device/portable.h"

namespace qtool::device {

template <class Shared, class... Phase>
void emulate_launch(int64_t blocks, int64_t block_threads, size_t shared_elems, Phase&&... phases) {
  static_assert(std::is_trivially_copyable_v<Shared>);
  std::vector<Shared> shared(shared_elems);
  for (int64_t b = 0; b < blocks; ++b) {
    if (!shared.empty())  // a kernel without shared memory: data() may be null, and memset(null, ...) is UB
      std::memset(static_cast<void*>(shared.data()), 0xA5, shared.size() * sizeof(Shared));
    auto run_phase = [&](auto&& phase) {
      for (int64_t t = 0; t < block_threads; ++t)
        phase(ThreadCoord{b, t, blocks, block_threads}, std::span<Shared>(shared));
    };
    (run_phase(phases), ...);
  }
}

}  // namespace qtool::device
