// The CUDA elementwise kernels' per-thread loops (runtime/kernels/elementwise_device.h), run through the emulated
// launch grid, against the CPU kernels: bit for bit, NaN, ±inf and -0 included.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "device/emulate.h"
#include "kernel_harness.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/elementwise_device.h"

using namespace qtool;
using namespace qtool::runtime;
using namespace qtool::runtime::kernels::device_elementwise;
using qtool::device::emulate_launch;
using qtool::device::ThreadCoord;
using qtool::test::attr_float;
using qtool::test::run_kernel;

namespace {

constexpr int64_t kBlocks = 3, kThreads = 32;  // fewer threads than values: grid-stride steps are exercised

// Values of every kind: random in [-8, 8), specials, and exact edges of the activations (-3, 3, 0, ±0).
Tensor inputs(Shape shape, uint32_t seed) {
  Tensor t = test::random_tensor(shape, seed, -8.f, 8.f);
  float* v = t.data<float>();
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), INFINITY, -INFINITY, -0.0f, 0.0f, -3.f, 3.f,
                            1e30f, -1e-30f};
  for (size_t i = 0; i < std::size(specials) && static_cast<int64_t>(i * 5) < t.numel(); ++i) v[i * 5] = specials[i];
  return t;
}

bool same_bits(const Tensor& a, const std::vector<float>& b) {
  return a.numel() == static_cast<int64_t>(b.size()) && std::memcmp(a.data<float>(), b.data(), b.size() * 4) == 0;
}

}  // namespace

TEST_CASE("CUDA unary kernels (emulated launch grid) equal the CPU kernels bit for bit") {
  const Tensor x = inputs({4, 5, 7}, 5);
  const int64_t n = x.numel();
  struct Case {
    const char* op;
    NodeAttrs attrs;
    std::vector<Tensor> extra;
    UnaryOp u{Unary::Relu};
  };
  NodeAttrs leaky, hsig;
  leaky.values["alpha"] = attr_float(0.1f);
  hsig.values["alpha"] = attr_float(0.25f);
  hsig.values["beta"] = attr_float(0.4f);
  const std::vector<Case> cases = {
      {"Relu", {}, {}, {Unary::Relu}},
      {"LeakyRelu", leaky, {}, {Unary::LeakyRelu, 0.1f}},
      {"Clip", {}, {Tensor::from_vector<float>({}, {-1.5f}), Tensor::from_vector<float>({}, {6.f})},
       {Unary::Clip, -1.5f, 6.f}},
      {"HardSigmoid", hsig, {}, {Unary::HardSigmoid, 0.25f, 0.4f}},
      {"HardSwish", {}, {}, {Unary::HardSwish}},
      {"Sigmoid", {}, {}, {Unary::Sigmoid}},
  };
  for (const Case& c : cases) {
    INFO(c.op);
    std::vector<Tensor> in = {x};
    in.insert(in.end(), c.extra.begin(), c.extra.end());
    const Tensor cpu = run_kernel(c.op, 17, c.attrs, in).at(0);
    std::vector<float> y(static_cast<size_t>(n), -1.f);
    emulate_launch<char>(kBlocks, kThreads, 0, [&](ThreadCoord t, std::span<char>) {
      unary_loop(t, c.u, x.data<float>(), y.data(), n);
    });
    CHECK(same_bits(cpu, y));
  }
}

TEST_CASE("CUDA binary kernels (emulated launch grid, broadcasting) equal the CPU kernels bit for bit") {
  const Tensor a = inputs({2, 3, 4}, 7);
  const std::vector<std::pair<const char*, Binary>> ops = {{"Add", Binary::Add}, {"Sub", Binary::Sub},
                                                           {"Mul", Binary::Mul}, {"Div", Binary::Div},
                                                           {"Max", Binary::Max}, {"Min", Binary::Min}};
  for (const Tensor& b : {inputs({2, 3, 4}, 8), inputs({3, 1}, 9), Tensor::from_vector<float>({}, {NAN}),
                          inputs({1, 1, 4}, 10)}) {
    const kernels::BroadcastPlan plan = kernels::plan_broadcast({&a.shape(), &b.shape()}, NodeInfo{});
    Broadcast2 bc;
    REQUIRE(to_broadcast2(plan, bc));
    for (const auto& [name, op] : ops) {
      INFO(name << " with b of shape " << shape_str(b.shape()));
      const Tensor cpu = run_kernel(name, 17, {}, {a, b}).at(0);
      std::vector<float> y(static_cast<size_t>(plan.numel), -1.f);
      emulate_launch<char>(kBlocks, kThreads, 0, [&](ThreadCoord t, std::span<char>) {
        binary_loop(t, op, bc, a.data<float>(), b.data<float>(), y.data(), plan.numel);
      });
      CHECK(same_bits(cpu, y));
    }
  }
}

// The CPU epilogue (fused_activation.cc) is a multiversioned hot loop: its x86-64-v3/v4 clones may contract
// a*x + b into one FMA (HardSigmoid) and vectorise exp (Silu), so those two agree within float tolerance, NaN's
// sign aside; the device code (--fmad=false) computes them as the standalone HardSigmoid and Sigmoid kernels do.
TEST_CASE("CUDA fused activations (emulated launch grid) equal the CPU epilogue") {
  using Kind = FusedActivation::Kind;
  const Tensor x = inputs({3, 41}, 11);
  const int64_t n = x.numel();
  UnaryOp none{Unary::Relu};
  CHECK_FALSE(fused_unary(FusedActivation{Kind::None}, none));
  for (const FusedActivation& a : {FusedActivation{Kind::Relu}, FusedActivation{Kind::Clip, -1.f, 6.f},
                                   FusedActivation{Kind::HardSigmoid, 0.2f, 0.5f}, FusedActivation{Kind::HardSwish},
                                   FusedActivation{Kind::Silu}}) {
    INFO("kind " << static_cast<int>(a.kind));
    UnaryOp u{Unary::Relu};
    REQUIRE(fused_unary(a, u));
    std::vector<float> cpu(x.data<float>(), x.data<float>() + n), y(static_cast<size_t>(n), -1.f);
    kernels::compute::apply_activation(a, cpu.data(), n);
    emulate_launch<char>(kBlocks, kThreads, 0, [&](ThreadCoord t, std::span<char>) {
      unary_loop(t, u, x.data<float>(), y.data(), n);
    });
    if (a.kind == Kind::HardSigmoid || a.kind == Kind::Silu) {
      for (size_t i = 0; i < cpu.size(); ++i) {
        INFO("x = " << x.data<float>()[i]);
        CHECK((cpu[i] == y[i] || (std::isnan(cpu[i]) && std::isnan(y[i])) ||
               std::fabs(cpu[i] - y[i]) <= 1e-6f * std::max(1.f, std::fabs(cpu[i]))));
      }
    } else {
      CHECK(std::memcmp(cpu.data(), y.data(), cpu.size() * sizeof(float)) == 0);
    }
  }
}
