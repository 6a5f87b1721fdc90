// Runs a test body once per vector instruction set this CPU has (the observer loops of the CPU backend for
// each: baseline, AVX2, AVX-512), then lets the loops use the widest again.
#pragma once

#include <catch2/catch.hpp>

#include "calib/kernels.h"

namespace qtool::test {

template <class Body>
void for_each_cpu_isa(Body body) {
  using calib::CpuIsa, calib::set_cpu_isa_limit;
  const CpuIsa widest = set_cpu_isa_limit(CpuIsa::Avx512);
  for (const CpuIsa isa : {CpuIsa::Baseline, CpuIsa::Avx2, CpuIsa::Avx512}) {
    if (isa > widest) break;
    INFO("cpu isa " << static_cast<int>(isa));
    REQUIRE(set_cpu_isa_limit(isa) == isa);
    body();
  }
  set_cpu_isa_limit(CpuIsa::Avx512);
}

}  // namespace qtool::test
