// Pipelined observation: the task pipeline's guarantees (per-key order, bounded pending bytes, errors), and
// calibrate_model giving the same table whichever way it splits its threads.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "calib/calibrate.h"
#include "calib/calibration_table.h"
#include "calib/for_each_cpu_isa.h"
#include "calib/observation_pipeline.h"
#include "calib/range_select.h"
#include "test_paths.h"

using namespace qtool;
using namespace qtool::calib;
using qtool::test::for_each_cpu_isa;
using qtool::test::shared_models;
using qtool::test::shared_tensors;

namespace {
// Burns a little CPU so tasks overlap and finish out of submission order across keys.
void spin(int units) {
  volatile double x = 1;
  for (int i = 0; i < units * 1000; ++i) x = x * 1.0000001 + 1e-9;
}
}  // namespace

TEST_CASE("observation pipeline: tasks of one key run in submission order, never two at once") {
  constexpr int kKeys = 7, kPerKey = 60;
  std::vector<int> keys(kKeys);  // their addresses are the keys
  std::vector<std::vector<int>> seen(kKeys);
  std::vector<std::atomic<int>> running(kKeys);
  std::atomic<bool> overlap{false};
  std::mt19937 rng(3);
  for (const size_t budget : {size_t{1} << 30, size_t{3000}}) {  // large: workers do it all; small: the submitter helps
    for (auto& s : seen) s.clear();
    ObservationPipeline pipeline(3, budget);
    for (int i = 0; i < kPerKey; ++i)
      for (int k = 0; k < kKeys; ++k) {
        const int work = static_cast<int>(rng() % 20);
        pipeline.submit(&keys[static_cast<size_t>(k)], 1000, [&, k, i, work] {
          if (running[static_cast<size_t>(k)].fetch_add(1) != 0) overlap = true;
          spin(work);
          seen[static_cast<size_t>(k)].push_back(i);
          running[static_cast<size_t>(k)].fetch_sub(1);
        });
      }
    pipeline.finish();
    CHECK_FALSE(overlap);
    for (int k = 0; k < kKeys; ++k) {
      std::vector<int> want(kPerKey);
      for (int i = 0; i < kPerKey; ++i) want[static_cast<size_t>(i)] = i;
      CHECK(seen[static_cast<size_t>(k)] == want);
    }
    // One task past the budget is admitted, then the submitter works the queue down.
    if (budget == 3000) CHECK(pipeline.peak_pending_bytes() <= budget + 1000);
  }
}

TEST_CASE("observation pipeline: a task's exception reaches submit or finish, and stops the rest") {
  int a = 0, b = 0;
  std::atomic<int> ran{0};
  ObservationPipeline pipeline(2, size_t{1} << 30);
  pipeline.submit(&a, 8, [&] {
    ++ran;
    throw std::runtime_error("observer failed on tensor 'a'");
  });
  bool thrown = false;
  try {
    for (int i = 0; i < 1000; ++i) {
      pipeline.submit(&b, 8, [&] { ++ran; });
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    pipeline.finish();
  } catch (const std::runtime_error& e) {
    thrown = true;
    CHECK(std::string(e.what()) == "observer failed on tensor 'a'");
  }
  CHECK(thrown);
  CHECK_THROWS_AS(pipeline.finish(), std::runtime_error);  // and again: the error sticks
  // finish() has waited for running tasks, and workers take no new ones after an error.
  const int after = ran.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(ran.load() == after);
  CHECK(after < 1001);
}

TEST_CASE("observation pipeline: destroying it without finish() drops pending tasks and joins") {
  int key = 0;
  std::atomic<int> ran{0};
  {
    ObservationPipeline pipeline(1, size_t{1} << 30);
    for (int i = 0; i < 200; ++i)
      pipeline.submit(&key, 8, [&] {
        spin(50);
        ++ran;
      });
  }
  CHECK(ran.load() <= 200);
}

TEST_CASE("calibrate_model: the table does not depend on how threads are split between interpreter and observers") {
  CalibrateOptions base;
  base.data_files["input"] = shared_tensors() / "mobilenetv2_calib6.npy";
  base.batch_size = 2;
  base.methods =
      parse_range_methods("all", "--methods");  // torch_histogram included: it depends on the order of batches
  std::map<std::string, std::string> tables;
  for (const auto& [threads, observers] : std::vector<std::pair<int, int>>{{1, 0}, {2, -1}, {3, 2}, {2, 3}}) {
    CalibrateOptions o = base;
    o.threads = threads;
    o.observer_threads = observers;
    const ThreadPlan plan = plan_threads(threads, observers, o.methods);
    CalibrateResult r = calibrate_model(shared_models() / "mobilenetv2-1.0-224-fp32.onnx", o);
    CHECK(r.table.tensors.size() > 100);
    tables[std::to_string(plan.forward) + "+" + std::to_string(plan.observers)] = calibration_to_json(r.table);
  }
  REQUIRE(tables.size() == 4);
  const std::string& inline_table = tables.at("1+0");
  for (const auto& [split, json] : tables) {
    INFO("interpreter + observer threads: " << split);
    CHECK(json == inline_table);
  }
}

TEST_CASE("calibrate_model: the table's bytes do not depend on the vector instruction set of the observer loops") {
  CalibrateOptions o;
  o.data_files["input"] = shared_tensors() / "mobilenetv2_calib6.npy";
  o.batch_size = 3;
  o.threads = 2;
  o.methods = parse_range_methods("all", "--methods");
  std::string first;  // the baseline loops' table
  for_each_cpu_isa([&] {
    const std::string json =
        calibration_to_json(calibrate_model(shared_models() / "mobilenetv2-1.0-224-fp32.onnx", o).table);
    if (first.empty()) first = json;
    CHECK(json == first);
  });
}

TEST_CASE("plan_threads: observers get threads in proportion to their cost") {
  const RangeMethods hist = kDefaultRangeMethods, minmax = {RangeMethod::MinMax};
  const RangeMethods torch = {RangeMethod::MinMax, RangeMethod::TorchHistogram};
  auto plan = [](int threads, int observers, const RangeMethods& m) {
    const ThreadPlan p = plan_threads(threads, observers, m);
    return std::make_pair(p.forward, p.observers);
  };
  CHECK(plan(1, -1, hist) == std::make_pair(1, 0));  // one thread: inline
  CHECK(plan(2, -1, hist) == std::make_pair(1, 1));
  CHECK(plan(5, -1, hist) == std::make_pair(3, 2));
  CHECK(plan(4, -1, torch) == std::make_pair(2, 2));
  CHECK(plan(4, -1, minmax) == std::make_pair(3, 1));  // min/max only: an eighth, at least one
  CHECK(plan(16, -1, minmax) == std::make_pair(14, 2));
  CHECK(plan(1, -1, minmax) == std::make_pair(1, 0));
  CHECK(plan(4, 0, hist) == std::make_pair(4, 0));
  CHECK(plan(4, 1, minmax) == std::make_pair(3, 1));
  CHECK(plan(2, 3, hist) == std::make_pair(1, 3));
}
