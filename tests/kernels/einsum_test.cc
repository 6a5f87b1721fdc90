// Einsum's transpose+GEMM evaluation against a naive reference: one loop over every assignment of
// every label, multiplying the operands and adding into the output.
#include <catch2/catch.hpp>
#include <map>

#include "kernel_harness.h"

using namespace qtool;
using namespace qtool::test;

namespace {
// Naive einsum for explicit equations of letters only ("ab,bc->ac").
Tensor naive_einsum(const std::string& eq, const std::vector<Tensor>& xs) {
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string cur;
  for (char c : eq.substr(0, arrow)) {
    if (c == ',') {
      terms.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  terms.push_back(cur);
  const std::string out = eq.substr(arrow + 2);
  std::map<char, int64_t> size;
  for (size_t i = 0; i < terms.size(); ++i)
    for (size_t k = 0; k < terms[i].size(); ++k) size[terms[i][k]] = xs[i].dim(static_cast<int64_t>(k));
  std::vector<char> labels;
  for (const auto& [l, s] : size) labels.push_back(l);
  Shape ys;
  for (char c : out) ys.push_back(size[c]);
  Tensor y = Tensor::zeros(DType::Float32, ys);
  std::map<char, int64_t> v;
  for (char l : labels) v[l] = 0;
  for (;;) {
    double p = 1;
    for (size_t i = 0; i < terms.size(); ++i) {
      int64_t off = 0;
      for (size_t k = 0; k < terms[i].size(); ++k) off = off * xs[i].dim(static_cast<int64_t>(k)) + v[terms[i][k]];
      p *= xs[i].data<float>()[off];
    }
    int64_t off = 0;
    for (size_t k = 0; k < out.size(); ++k) off = off * ys[k] + v[out[k]];
    y.data<float>()[off] += static_cast<float>(p);
    size_t k = labels.size();
    for (; k-- > 0;) {
      if (++v[labels[k]] < size[labels[k]]) break;
      v[labels[k]] = 0;
    }
    if (k == static_cast<size_t>(-1)) break;
  }
  return y;
}

runtime::NodeAttrs eq_attr(const std::string& eq) {
  runtime::NodeAttrs a;
  a.values["equation"] = attr_str(eq);
  return a;
}
}  // namespace

TEST_CASE("Einsum matches the naive evaluation on matmul-like and general forms") {
  struct Case {
    std::string eq;
    std::vector<Shape> shapes;
  };
  const Case cases[] = {
      {"ij,jk->ik", {{3, 4}, {4, 5}}},
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
      {"bhqd,bhkd->bhqk", {{2, 3, 4, 5}, {2, 3, 6, 5}}},  // attention scores
      {"bhqk,bhkd->bqhd", {{2, 3, 4, 6}, {2, 3, 6, 5}}},  // attention output, transposed
      {"ij->ji", {{3, 4}}},
      {"bn,anm,bm->ba", {{2, 3}, {4, 3, 5}, {2, 5}}},  // bilinear
      {"ii->i", {{4, 4}}},                             // diagonal
      {"ijk->", {{2, 3, 4}}},                          // full sum
      {"ij,kj->ikj", {{3, 4}, {2, 4}}},                // outer product kept axis
      {"abc,cd,bd->a", {{2, 3, 4}, {4, 5}, {3, 5}}},
  };
  for (const auto& c : cases) {
    DYNAMIC_SECTION(c.eq) {
      std::vector<Tensor> xs;
      for (size_t i = 0; i < c.shapes.size(); ++i) xs.push_back(random_tensor(c.shapes[i], 100 + i));
      const Tensor want = naive_einsum(c.eq, xs);
      for (int threads : {1, 2}) {
        auto y = run_kernel("Einsum", 12, eq_attr(c.eq), xs, 1, threads);
        CHECK(max_abs_diff(y[0], want) < 1e-4);
      }
    }
  }
}

TEST_CASE("Einsum ellipsis broadcasts like numpy and implicit output sorts labels") {
  Tensor a = random_tensor({2, 1, 3, 4}, 1), b = random_tensor({5, 4, 6}, 2);
  auto y = run_kernel("Einsum", 12, eq_attr("...ij,...jk->...ik"), {a, b});
  REQUIRE(y[0].shape() == Shape{2, 5, 3, 6});
  // Same as MatMul's broadcasting.
  auto m = run_kernel("MatMul", 13, {}, {a, b});
  CHECK(max_abs_diff(y[0], m[0]) < 1e-5);
  // Implicit: "ba" -> output "ab" (transpose).
  Tensor t = random_tensor({3, 4}, 3);
  auto tr = run_kernel("Einsum", 12, eq_attr("ba"), {t});
  CHECK(max_abs_diff(tr[0], naive_einsum("ba->ab", {t})) < 1e-6);
  CHECK_THROWS_AS(run_kernel("Einsum", 12, eq_attr("ij,jk->ik"), {random_tensor({2, 3}, 4), random_tensor({4, 5}, 5)}),
                  BadInputError);
}
