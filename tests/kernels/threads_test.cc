// Every compute kernel on inputs large enough to take its multi-threaded path: results with 2 threads
// equal those with 1 thread (within float tolerance) and, for conv, the reference twin.
#include <catch2/catch.hpp>

#include <omp.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>

#include "kernel_harness.h"
#include "runtime/kernels/blas.h"
#include "runtime/kernels/common.h"
#include "runtime/kernels/reference.h"

using namespace qtool;
using namespace qtool::test;

namespace {
struct OpCase {
  const char* what;
  std::string op;
  int opset;
  runtime::NodeAttrs attrs;
  std::vector<Tensor> inputs;
};

runtime::NodeAttrs attrs(std::initializer_list<std::pair<const char*, runtime::Attribute>> kv) {
  runtime::NodeAttrs a;
  for (const auto& [k, v] : kv) a.values[k] = v;
  return a;
}
}  // namespace

TEST_CASE("compute kernels give the same results with 1 and 2 threads") {
  // 225280 elements: above the minimum work of one region (threading.h) for every kernel below.
  const Tensor img = random_tensor({2, 16, 80, 88}, 1);
  const OpCase cases[] = {
      {"conv 3x3",
       "Conv",
       11,
       attrs({{"pads", attr_ints({1, 1, 1, 1})}}),
       {img, random_tensor({24, 16, 3, 3}, 2), random_tensor({24}, 3)}},
      {"conv 3x3 stride 2 grouped",
       "Conv",
       11,
       attrs({{"pads", attr_ints({1, 1, 1, 1})}, {"strides", attr_ints({2, 2})}, {"group", attr_int(4)}}),
       {img, random_tensor({8, 4, 3, 3}, 4)}},
      {"conv depthwise",
       "Conv",
       11,
       attrs({{"pads", attr_ints({1, 1, 1, 1})}, {"group", attr_int(16)}}),
       {img, random_tensor({16, 1, 3, 3}, 5), random_tensor({16}, 6)}},
      {"conv depthwise small planes",
       "Conv",
       11,
       attrs({{"pads", attr_ints({1, 1, 1, 1})}, {"strides", attr_ints({2, 2})}, {"group", attr_int(36)}}),
       {random_tensor({1, 36, 14, 14}, 24), random_tensor({36, 1, 3, 3}, 25), random_tensor({36}, 26)}},
      {"conv pointwise", "Conv", 11, {}, {img, random_tensor({32, 16, 1, 1}, 7)}},
      {"conv transpose",
       "ConvTranspose",
       11,
       attrs({{"strides", attr_ints({2, 2})}}),
       {img, random_tensor({16, 8, 2, 2}, 8)}},
      {"matmul batched", "MatMul", 13, {}, {random_tensor({4, 3, 64, 48}, 9), random_tensor({3, 48, 80}, 10)}},
      {"matmul 2-D rhs", "MatMul", 13, {}, {random_tensor({2, 300, 96}, 11), random_tensor({96, 120}, 12)}},
      {"gemm",
       "Gemm",
       13,
       attrs({{"transB", attr_int(1)}, {"alpha", attr_float(0.5f)}}),
       {random_tensor({200, 96}, 13), random_tensor({150, 96}, 14), random_tensor({150}, 15)}},
      {"maxpool", "MaxPool", 12, attrs({{"kernel_shape", attr_ints({3, 3})}, {"strides", attr_ints({2, 2})}}), {img}},
      {"averagepool",
       "AveragePool",
       11,
       attrs({{"kernel_shape", attr_ints({3, 3})}, {"pads", attr_ints({1, 1, 1, 1})}, {"ceil_mode", attr_int(1)}}),
       {img}},
      {"global average pool", "GlobalAveragePool", 1, {}, {img}},
      {"batchnorm",
       "BatchNormalization",
       15,
       {},
       {img, random_tensor({16}, 16), random_tensor({16}, 17), random_tensor({16}, 18),
        random_tensor({16}, 19, 0.5f, 2.f)}},
      {"instancenorm", "InstanceNormalization", 6, {}, {img, random_tensor({16}, 20), random_tensor({16}, 21)}},
      {"layernorm",
       "LayerNormalization",
       17,
       attrs({{"axis", attr_int(-1)}}),
       {img, random_tensor({88}, 22), random_tensor({88}, 23)}},
      {"softmax axis 1", "Softmax", 13, attrs({{"axis", attr_int(1)}}), {img}},
      {"logsoftmax last", "LogSoftmax", 13, {}, {img}},
      {"reduce mean", "ReduceMean", 13, attrs({{"axes", attr_ints({1, 3})}}), {img}},
      {"reduce sum square", "ReduceSumSquare", 13, attrs({{"axes", attr_ints({2})}, {"keepdims", attr_int(0)}}), {img}},
      {"reduce log sum exp all", "ReduceLogSumExp", 13, {}, {img}},
      {"argmax", "ArgMax", 13, attrs({{"axis", attr_int(2)}}), {img}},
      {"resize linear",
       "Resize",
       13,
       attrs({{"mode", attr_str("linear")}}),
       {img, Tensor(), Tensor::from_vector<float>({4}, {1, 1, 1.5f, 2.f})}},
      {"resize nearest",
       "Resize",
       13,
       attrs({{"mode", attr_str("nearest")}}),
       {img, Tensor(), Tensor::from_vector<float>({4}, {1, 1, 2.f, 2.f})}},
      {"resize cubic",
       "Resize",
       13,
       attrs({{"mode", attr_str("cubic")}}),
       {img, Tensor(), Tensor(), Tensor::from_vector<int64_t>({4}, {2, 16, 30, 70})}},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.what) {
      auto one = run_kernel(c.op, c.opset, c.attrs, c.inputs, 1, 1);
      auto two = run_kernel(c.op, c.opset, c.attrs, c.inputs, 1, 2);
      REQUIRE(one[0].shape() == two[0].shape());
      CHECK(compare_outputs(two[0], one[0], 1e-5, 1e-5) == "");
      if (c.op == "Conv") {
        const auto* g = c.attrs.find("group");
        const auto* p = c.attrs.find("pads");
        const auto* s = c.attrs.find("strides");
        const runtime::kernels::compute::ConvParams params{s ? s->ints : std::vector<int64_t>{1, 1},
                                                           {1, 1},
                                                           p ? p->ints : std::vector<int64_t>{0, 0, 0, 0},
                                                           g ? g->i : 1};
        const Tensor want = runtime::kernels::compute::conv_ref(c.inputs[0], c.inputs[1],
                                                                c.inputs.size() > 2 ? &c.inputs[2] : nullptr, params);
        CHECK(max_abs_diff(two[0], want) < 1e-4);
      }
    }
  }
}

TEST_CASE("a loop below the minimum work runs on the calling thread, one at it is shared with a helper") {
  namespace k = runtime::kernels;
  std::mutex mutex;
  std::set<std::thread::id> ids;
  int64_t covered = 0;
  auto record = [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mutex);
    ids.insert(std::this_thread::get_id());
    covered += e - b;
  };
  k::parallel_range(k::kParallelGrain - 1, 2, record);
  CHECK(ids == std::set<std::thread::id>{std::this_thread::get_id()});  // nobody woken
  CHECK(covered == k::kParallelGrain - 1);
  // At the grain the loop is cut in chunks a helper may claim: the calling thread's first chunk waits (up to 5 s)
  // until another thread has run one, so this fails only if no helper ever joins.
  ids.clear();
  covered = 0;
  const auto caller = std::this_thread::get_id();
  std::atomic<bool> helped{false};
  k::parallel_range(k::kParallelGrain, 2, [&](int64_t b, int64_t e) {
    record(b, e);
    if (std::this_thread::get_id() != caller) helped = true;
    for (int i = 0; i < 5000 && !helped && std::this_thread::get_id() == caller; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  CHECK(helped);
  CHECK(ids.size() == 2);
  CHECK(covered == k::kParallelGrain);

  CHECK(k::threads_for(k::kParallelMinWork - 1, 4) == 1);
  CHECK(k::threads_for(k::kParallelMinWork, 4) == 4);
  CHECK(k::threads_for(3 * k::kParallelMinWork - 1, 4, 3) == 1);  // three regions need three times the work
  CHECK(k::threads_for_macs(k::kParallelMinMacs - 1, 2) == 1);
  CHECK(k::threads_for_macs(k::kParallelMinMacs, 2) == 2);
}

TEST_CASE("a loop inside a shared loop's chunk, or while another thread holds the helpers, runs on its own thread") {
  namespace k = runtime::kernels;
  // Nested: every inner loop of a chunk stays on the thread that runs the chunk.
  std::atomic<int> inner_elsewhere{0}, chunks{0};
  k::compute::parallel_for(64, 2, [&](int64_t) {
    ++chunks;
    const auto me = std::this_thread::get_id();
    k::compute::parallel_for(16, 2, [&](int64_t) {
      if (std::this_thread::get_id() != me) ++inner_elsewhere;
    });
  });
  CHECK(chunks == 64);
  CHECK(inner_elsewhere == 0);
  // Busy: while one thread's loop holds the helpers (its chunks wait for the other thread's loop to finish), the
  // other thread's loop runs alone and completes instead of waiting for them.
  std::atomic<bool> other_done{false};
  std::set<std::thread::id> other_ids;
  std::thread other;
  k::compute::parallel_for(2, 2, [&](int64_t i) {
    if (i != 0) return;
    other = std::thread([&] {
      std::mutex m;
      k::compute::parallel_for(32, 2, [&](int64_t) {
        std::lock_guard<std::mutex> lock(m);
        other_ids.insert(std::this_thread::get_id());
      });
      other_done = true;
    });
    for (int w = 0; w < 5000 && !other_done; ++w) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  other.join();
  CHECK(other_done);
  CHECK(other_ids.size() == 1);
}
