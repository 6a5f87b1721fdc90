// Einsum (opset 12-21), float32 and float64.
//
// Y = sum over labels absent from the output of prod_i X_i[labels_i], numpy semantics: "..." broadcasts
// right-aligned, a label repeated within one term takes the diagonal, no "->" means the output is the
// ellipsis then the labels used once, alphabetically.
// Evaluation: per operand take diagonals and sum out labels no one else needs; then contract operands
// left to right, each pair as one batched GEMM after transposing to [batch, free, contracted] and
// [batch, contracted, free]; finally sum out leftovers and transpose to the output order.
#include <cblas.h>

#include <algorithm>
#include <map>
#include <set>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

template <class T>
struct Term {
  std::vector<T> v;
  Shape shape;
  std::vector<int> labels;
};

// Copies the strided view (shape, strides) of src into a dense C-ordered vector.
template <class T>
std::vector<T> materialize(const T* src, const Shape& shape, const std::vector<int64_t>& strides) {
  const int64_t n = shape_numel(shape);
  std::vector<T> out(n);
  std::vector<int64_t> idx(shape.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    out[i] = src[off];
    for (size_t k = shape.size(); k-- > 0;) {
      if (++idx[k] < shape[k]) {
        off += strides[k];
        break;
      }
      off -= (shape[k] - 1) * strides[k];
      idx[k] = 0;
    }
  }
  return out;
}

template <class T>
Term<T> permute(const Term<T>& t, const std::vector<int>& order) {
  if (order == t.labels) return t;
  const auto st = strides_of(t.shape);
  Term<T> r;
  std::vector<int64_t> strides;
  for (int l : order) {
    const size_t k = std::find(t.labels.begin(), t.labels.end(), l) - t.labels.begin();
    r.shape.push_back(t.shape[k]);
    strides.push_back(st[k]);
  }
  r.labels = order;
  r.v = materialize(t.v.data(), r.shape, strides);
  return r;
}

// Takes diagonals so each label appears once.
template <class T>
Term<T> diagonal(const Term<T>& t) {
  const auto st = strides_of(t.shape);
  Term<T> r;
  std::vector<int64_t> strides;
  bool repeated = false;
  for (size_t k = 0; k < t.labels.size(); ++k) {
    auto it = std::find(r.labels.begin(), r.labels.end(), t.labels[k]);
    if (it != r.labels.end()) {
      strides[it - r.labels.begin()] += st[k];
      r.shape[it - r.labels.begin()] = std::min(r.shape[it - r.labels.begin()], t.shape[k]);
      repeated = true;
      continue;
    }
    r.labels.push_back(t.labels[k]);
    r.shape.push_back(t.shape[k]);
    strides.push_back(st[k]);
  }
  if (!repeated) return t;
  r.v = materialize(t.v.data(), r.shape, strides);
  return r;
}

// Sums out every label not in `keep`.
template <class T>
Term<T> sum_out(const Term<T>& t, const std::set<int>& keep) {
  std::vector<int> kept, summed;
  for (int l : t.labels) (keep.count(l) ? kept : summed).push_back(l);
  if (summed.empty()) return t;
  std::vector<int> order = kept;
  order.insert(order.end(), summed.begin(), summed.end());
  const Term<T> p = permute(t, order);
  Term<T> r;
  r.labels = kept;
  r.shape.assign(p.shape.begin(), p.shape.begin() + kept.size());
  const int64_t outer = shape_numel(r.shape), inner = outer ? static_cast<int64_t>(p.v.size()) / outer : 0;
  r.v.assign(outer, T(0));
  for (int64_t i = 0; i < outer; ++i)
    for (int64_t j = 0; j < inner; ++j) r.v[i] += p.v[i * inner + j];
  return r;
}

// Broadcasts size-1 axes of t up to the sizes in `sizes`.
template <class T>
Term<T> expand(const Term<T>& t, const std::map<int, int64_t>& sizes) {
  bool need = false;
  for (size_t k = 0; k < t.labels.size(); ++k) need = need || t.shape[k] != sizes.at(t.labels[k]);
  if (!need) return t;
  auto st = strides_of(t.shape);
  Term<T> r;
  r.labels = t.labels;
  for (size_t k = 0; k < t.labels.size(); ++k) {
    r.shape.push_back(sizes.at(t.labels[k]));
    if (t.shape[k] != r.shape[k]) st[k] = 0;
  }
  r.v = materialize(t.v.data(), r.shape, st);
  return r;
}

template <class T>
void gemm_nn(int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C, int threads) {
  if constexpr (std::is_same_v<T, float>) {
    sgemm(false, false, M, N, K, 1.f, A, K, B, N, 0.f, C, N, threads);
  } else {
    if (M == 0 || N == 0) return;
    if (K == 0) {
      std::fill_n(C, M * N, T(0));
      return;
    }
    ensure_blas_single_threaded();
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(M), static_cast<int>(N),
                static_cast<int>(K), 1.0, A, static_cast<int>(K), B, static_cast<int>(N), 0.0, C, static_cast<int>(N));
  }
}

template <class T>
Term<T> contract(const Term<T>& a, const Term<T>& b, const std::set<int>& keep, int threads) {
  std::vector<int> batch, contracted, a_only, b_only;
  for (int l : a.labels) {
    const bool in_b = std::count(b.labels.begin(), b.labels.end(), l) > 0;
    if (in_b)
      (keep.count(l) ? batch : contracted).push_back(l);
    else
      a_only.push_back(l);
  }
  for (int l : b.labels)
    if (!std::count(a.labels.begin(), a.labels.end(), l)) b_only.push_back(l);
  auto cat = [](std::vector<int> x, const std::vector<int>& y, const std::vector<int>& z) {
    x.insert(x.end(), y.begin(), y.end());
    x.insert(x.end(), z.begin(), z.end());
    return x;
  };
  const Term<T> pa = permute(a, cat(batch, a_only, contracted));
  const Term<T> pb = permute(b, cat(batch, contracted, b_only));
  auto size_of = [](const Term<T>& t, size_t from, size_t n) {
    int64_t s = 1;
    for (size_t k = from; k < from + n; ++k) s *= t.shape[k];
    return s;
  };
  const int64_t nb = size_of(pa, 0, batch.size()), M = size_of(pa, batch.size(), a_only.size()),
                K = size_of(pa, batch.size() + a_only.size(), contracted.size()),
                N = size_of(pb, batch.size() + contracted.size(), b_only.size());
  Term<T> r;
  r.labels = cat(batch, a_only, b_only);
  r.shape.assign(pa.shape.begin(), pa.shape.begin() + batch.size() + a_only.size());
  r.shape.insert(r.shape.end(), pb.shape.begin() + batch.size() + contracted.size(), pb.shape.end());
  r.v.assign(nb * M * N, T(0));
  for (int64_t i = 0; i < nb; ++i)
    gemm_nn<T>(M, N, K, pa.v.data() + i * M * K, pb.v.data() + i * K * N, r.v.data() + i * M * N, threads);
  return r;
}

struct Equation {
  std::vector<std::vector<int>> terms;  // labels per operand, ellipsis dims as codes 1000+k
  std::vector<int> output;
};

Equation parse_equation(const NodeInfo& node, std::string eq, const std::vector<int64_t>& ranks) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  auto bad = [&](const std::string& why) { return BadInputError(node.label() + ": equation '" + eq + "': " + why); };
  std::vector<std::string> terms;
  for (size_t s = 0;;) {
    const size_t c = lhs.find(',', s);
    terms.push_back(lhs.substr(s, c == std::string::npos ? std::string::npos : c - s));
    if (c == std::string::npos) break;
    s = c + 1;
  }
  if (terms.size() != ranks.size())
    throw bad(std::to_string(terms.size()) + " terms for " + std::to_string(ranks.size()) + " inputs");
  int64_t ell = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    const size_t dots = terms[i].find("...");
    const int64_t letters = static_cast<int64_t>(terms[i].size()) - (dots == std::string::npos ? 0 : 3);
    if (dots != std::string::npos) ell = std::max(ell, ranks[i] - letters);
    if ((dots == std::string::npos && letters != ranks[i]) || letters > ranks[i])
      throw bad("term '" + terms[i] + "' does not match an input of rank " + std::to_string(ranks[i]));
  }
  auto parse_term = [&](const std::string& t, int64_t rank, bool is_output) {
    std::vector<int> labels;
    for (size_t k = 0; k < t.size(); ++k) {
      if (t.compare(k, 3, "...") == 0) {
        const int64_t n = is_output ? ell : rank - (static_cast<int64_t>(t.size()) - 3);
        for (int64_t e = ell - n; e < ell; ++e) labels.push_back(1000 + static_cast<int>(e));
        k += 2;
      } else if (std::isalpha(static_cast<unsigned char>(t[k]))) {
        labels.push_back(t[k]);
      } else {
        throw bad(std::string("unexpected character '") + t[k] + "'");
      }
    }
    return labels;
  };
  Equation e;
  std::map<int, int> count;
  for (size_t i = 0; i < terms.size(); ++i) {
    e.terms.push_back(parse_term(terms[i], ranks[i], false));
    for (int l : e.terms.back()) ++count[l];
  }
  if (arrow != std::string::npos) {
    e.output = parse_term(eq.substr(arrow + 2), 0, true);
  } else {
    for (int64_t k = 0; k < ell; ++k) e.output.push_back(1000 + static_cast<int>(k));
    for (const auto& [l, n] : count)
      if (l < 1000 && n == 1) e.output.push_back(l);
  }
  return e;
}

template <class T>
Tensor einsum_typed(KernelContext& ctx, const Equation& eq) {
  std::map<int, int64_t> sizes;
  std::vector<Term<T>> ops;
  for (size_t i = 0; i < eq.terms.size(); ++i) {
    const Tensor& x = ctx.input(i);
    Term<T> t{{x.data<T>(), x.data<T>() + x.numel()}, x.shape(), eq.terms[i]};
    for (size_t k = 0; k < t.labels.size(); ++k) {
      int64_t& s = sizes.emplace(t.labels[k], t.shape[k]).first->second;
      if (s == 1) s = t.shape[k];
      if (t.shape[k] != 1 && t.shape[k] != s)
        throw BadInputError(ctx.node.label() + ": label sizes " + std::to_string(s) + " and " +
                            std::to_string(t.shape[k]) + " of input " + std::to_string(i) + " do not match");
    }
    ops.push_back(diagonal(t));
  }
  const std::set<int> out_set(eq.output.begin(), eq.output.end());
  auto needed_after = [&](size_t i) {  // labels needed by the output or operands after i
    std::set<int> s = out_set;
    for (size_t j = i + 1; j < ops.size(); ++j) s.insert(ops[j].labels.begin(), ops[j].labels.end());
    return s;
  };
  std::set<int> keep0 = needed_after(0);
  Term<T> acc = sum_out(expand(ops[0], sizes), keep0);
  for (size_t i = 1; i < ops.size(); ++i) {
    const std::set<int> keep = needed_after(i);
    std::set<int> keep_b = keep;
    keep_b.insert(acc.labels.begin(), acc.labels.end());
    const Term<T> b = sum_out(expand(ops[i], sizes), keep_b);
    std::set<int> keep_a = keep;
    keep_a.insert(b.labels.begin(), b.labels.end());
    acc = sum_out(acc, keep_a);
    acc = contract(acc, b, keep, ctx.threads);
  }
  acc = sum_out(acc, out_set);
  for (int l : eq.output)
    if (!std::count(acc.labels.begin(), acc.labels.end(), l))
      throw BadInputError(ctx.node.label() + ": output label does not appear in any input");
  acc = permute(acc, eq.output);
  Tensor y(dtype_of_v<T>, acc.shape);
  std::copy(acc.v.begin(), acc.v.end(), y.data<T>());
  return y;
}

void einsum(KernelContext& ctx) {
  std::vector<int64_t> ranks;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) ranks.push_back(ctx.input(i).rank());
  if (ranks.empty()) throw BadInputError(ctx.node.label() + ": Einsum needs at least one input");
  const Attribute* a = ctx.node.attrs.find("equation");
  if (!a || a->kind != Attribute::Kind::String)
    throw BadInputError(ctx.node.label() + ": attribute 'equation' is missing");
  const Equation eq = parse_equation(ctx.node, a->s, ranks);
  const DType dt = ctx.input(0).dtype();
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    if (ctx.input(i).dtype() != dt) throw BadInputError(ctx.node.label() + ": inputs must share one dtype");
  if (dt == DType::Float32)
    ctx.outputs[0] = einsum_typed<float>(ctx, eq);
  else if (dt == DType::Float64)
    ctx.outputs[0] = einsum_typed<double>(ctx, eq);
  else
    throw UnsupportedError(ctx.node.label() + ": Einsum of dtype " + std::string(dtype_name(dt)) + " is not supported");
}

}  // namespace

std::unique_ptr<Kernel> make_einsum(const NodeInfo& node) { return make_function_kernel<einsum>(node); }

}  // namespace qtool::runtime::kernels
