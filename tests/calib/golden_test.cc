// qtool's observers against PyTorch 1.13's (torch.ao.quantization), on the batches and answers recorded by
// scripts/golden/gen_torch_observers.py in tests/calib/data/torch_observers.json.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "calib/minmax_observer.h"
#include "calib/moving_average_observer.h"
#include "calib/torch_histogram_observer.h"
#include "test_paths.h"

using namespace qtool::calib;
using nlohmann::json;

namespace {

const json& golden() {
  static const json doc = [] {
    std::ifstream f(qtool::test::source_dir() / "tests/calib/data/torch_observers.json");
    REQUIRE(f.good());
    return json::parse(f);
  }();
  return doc;
}

struct Data {
  std::vector<std::vector<float>> values;
  std::vector<std::vector<int64_t>> shapes;
};

Data batches(const json& c) {
  Data d;
  for (const json& b : c["batches"]) {
    d.values.push_back(b["values"].get<std::vector<float>>());
    d.shapes.push_back(b["shape"].get<std::vector<int64_t>>());
  }
  return d;
}

void feed(Observer& o, const Data& d, const ExecContext& ctx) {
  for (size_t i = 0; i < d.values.size(); ++i) o.observe(Batch::make(d.values[i], d.shapes[i], ctx), ctx);
}

std::vector<const json*> cases(const std::string& observer) {
  std::vector<const json*> out;
  for (const json& c : golden()["cases"])
    if (c["observer"] == observer) out.push_back(&c);
  REQUIRE(!out.empty());
  return out;
}

const std::vector<ExecContext>& contexts() {
  static const std::vector<ExecContext> ctx = {{&observer_backend(BackendKind::Reference), 1},
                                               {&observer_backend(BackendKind::Cpu), 2}};
  return ctx;
}

}  // namespace

TEST_CASE("MinMaxObserver equals torch's MinMaxObserver") {
  for (const json* c : cases("minmax"))
    for (const ExecContext& ctx : contexts()) {
      INFO((*c)["name"].get<std::string>());
      MinMaxObserver o;
      feed(o, batches(*c), ctx);
      CHECK(o.range().lo == (*c)["min"][0].get<float>());
      CHECK(o.range().hi == (*c)["max"][0].get<float>());
    }
}

TEST_CASE("MovingAverageMinMaxObserver equals torch's to float precision") {
  for (const json* c : cases("moving_average"))
    for (const ExecContext& ctx : contexts()) {
      INFO((*c)["name"].get<std::string>());
      MovingAverageMinMaxObserver o((*c)["averaging_constant"].get<float>());
      feed(o, batches(*c), ctx);
      const float lo = (*c)["min"][0].get<float>(), hi = (*c)["max"][0].get<float>();
      CHECK(o.range().lo == Approx(lo).epsilon(1e-6));
      CHECK(o.range().hi == Approx(hi).epsilon(1e-6));
    }
}

TEST_CASE("PerChannelMinMaxObserver equals torch's PerChannelMinMaxObserver") {
  for (const json* c : cases("per_channel_minmax"))
    for (const ExecContext& ctx : contexts()) {
      INFO((*c)["name"].get<std::string>());
      PerChannelMinMaxObserver o((*c)["axis"].get<int64_t>());
      feed(o, batches(*c), ctx);
      const auto mins = (*c)["min"].get<std::vector<float>>(), maxs = (*c)["max"].get<std::vector<float>>();
      const auto r = o.ranges();
      REQUIRE(r.size() == mins.size());
      for (size_t i = 0; i < r.size(); ++i) {
        CHECK(r[i].lo == mins[i]);
        CHECK(r[i].hi == maxs[i]);
      }
    }
}

TEST_CASE("torch_histogram reproduces HistogramObserver within one bin width") {
  for (const json* c : cases("torch_histogram"))
    for (const ExecContext& ctx : contexts()) {
      const std::string name = (*c)["name"];
      INFO(name);
      TorchHistogramObserver o;
      feed(o, batches(*c), ctx);
      // The histogram state itself: same range, same counts (PyTorch keeps them as float32).
      CHECK(o.min_val() == (*c)["hist_min"].get<float>());
      CHECK(o.max_val() == (*c)["hist_max"].get<float>());
      std::vector<double> expect(o.histogram().size(), 0.0);
      for (const json& nz : (*c)["histogram_nonzero"]) expect.at(nz[0].get<size_t>()) = nz[1].get<double>();
      double max_diff = 0;
      for (size_t i = 0; i < expect.size(); ++i) max_diff = std::max(max_diff, std::abs(expect[i] - o.histogram()[i]));
      CHECK(max_diff < 1e-3);
      // The selected range (_non_linear_param_search): within one bin width of PyTorch's.
      const double bin = (double{o.max_val()} - o.min_val()) / 2048.0;
      const Range r = o.range();
      CHECK(std::abs(r.lo - (*c)["min"][0].get<double>()) <= bin);
      CHECK(std::abs(r.hi - (*c)["max"][0].get<double>()) <= bin);
    }
}
