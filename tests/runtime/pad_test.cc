// Pad's row-wise fast path against its per-element reference twin, every mode, with crops.
#include "runtime/kernels/pad.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>

using qtool::DType;
using qtool::Shape;
using qtool::Tensor;
namespace k = qtool::runtime::kernels;

namespace {
qtool::runtime::NodeInfo pad_node() { return qtool::runtime::NodeInfo{.name = "p", .op_type = "Pad"}; }
}  // namespace

TEST_CASE("Pad fast path equals the reference for every mode, pads and crops") {
  const qtool::runtime::NodeInfo node = pad_node();
  std::mt19937 rng(5);
  const std::vector<std::pair<Shape, std::vector<int64_t>>> cases = {{{1, 3, 5, 4}, {0, 0, 1, 2, 0, 0, 2, 1}},
                                                                     {{2, 7}, {3, 2, 1, 3}},
                                                                     {{5}, {4, 4}},
                                                                     {{1, 56, 56, 24}, {0, 1, 1, 0, 0, 1, 1, 0}},
                                                                     {{3, 4, 5}, {-1, 0, 2, 0, 1, -2}},
                                                                     {{2, 3}, {0, -1, 0, -1}}};
  for (k::PadMode mode : {k::PadMode::Constant, k::PadMode::Reflect, k::PadMode::Edge, k::PadMode::Wrap}) {
    for (const auto& [shape, pads] : cases) {
      Tensor x(DType::Float32, shape);
      std::uniform_real_distribution<float> d(-1, 1);
      for (auto& v : x.span<float>()) v = d(rng);
      k::PadPlan p;
      p.mode = mode;
      const size_t r = shape.size();
      p.before.assign(pads.begin(), pads.begin() + r);
      p.after.assign(pads.begin() + r, pads.end());
      bool ok = true;
      for (size_t i = 0; i < r; ++i) {
        p.out_shape.push_back(shape[i] + p.before[i] + p.after[i]);
        // Reflect needs pads smaller than the dim.
        ok = ok && (mode != k::PadMode::Reflect || (p.before[i] < shape[i] && p.after[i] < shape[i]));
      }
      if (!ok) continue;
      const float fill = 7.5f;
      p.fill.resize(4);
      std::memcpy(p.fill.data(), &fill, 4);
      Tensor ref(DType::Float32, p.out_shape), one(DType::Float32, p.out_shape), two(DType::Float32, p.out_shape);
      k::pad_reference(p, x, ref, node);
      k::pad_rows(p, x, one, node, 1);
      k::pad_rows(p, x, two, node, 2);
      INFO("mode " << static_cast<int>(mode) << " shape " << qtool::shape_str(shape));
      CHECK(one.same_as(ref));
      CHECK(two.same_as(ref));
    }
  }
}
