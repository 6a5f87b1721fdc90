// Activation-to-weight scale migration (SmoothQuant). Error it reduces: the rounding error of an activation X
// that one per-tensor grid serves while a few of its channels set the range. For X·W, dividing channel j of X by
// s_j and multiplying row j of W by s_j leaves the product unchanged in float; with
// s_j = max|X_j|^alpha / max|W_j|^(1 - alpha) channel j's range becomes max|X_j|^(1-alpha) max|W_j|^(1-alpha)
// and the row's max|X_j|^alpha max|W_j|^alpha: at alpha = 1/2 both are sqrt(max|X_j| max|W_j|), which maximises
// sum_j (rX_j / RX)(rW_j / RW), the share of its grid each channel keeps on both sides (as cross-layer
// equalization does for Conv pairs, Nagel et al. 2019 eq. 9-10). Per-channel weight grids (one scale per output
// column) see the rows' growth only through each column's max, so larger alpha moves more of the range to the
// weights. The 1/s_j is folded into constants that produce X: exact in float, no node added. A tensor is smoothed
// only where that lowers the estimated rounding error of its readers' outputs on sampled rows (rounding_error).
#include "quantize/weights/smooth_quant.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>

#include "runtime/session.h"

namespace qtool::quantize {
namespace {

// One constant edit that divides channel j of the smoothed tensor by s_j.
struct Edit {
  enum Kind { Vector, Columns } kind;  // c_j /= s_j (a norm's scale or bias), or W[:, j] /= s_j (MatMul weight)
  std::string tensor;
};

// A float initializer nobody else reads (editing it changes only this path).
bool own_constant(const Graph& g, const std::string& name) {
  return g.is_float_initializer(name) && !g.is_graph_input(name) && g.consumers(name).size() == 1 &&
         !g.used_by_subgraph(name);
}

// One value per channel of the last axis: [..., 1, K].
bool channel_vector(const Graph& g, const std::string& name, int64_t k) {
  if (!own_constant(g, name)) return false;
  const onnx::TensorProto& t = *g.initializer(name);
  if (t.dims_size() == 0 || t.dims(t.dims_size() - 1) != k) return false;
  for (int i = 0; i + 1 < t.dims_size(); ++i)
    if (t.dims(i) != 1) return false;
  return true;
}

// (scale input, bias input or -1) of a normalisation over the last axis whose scale multiplies output 0.
std::optional<std::pair<int, int>> norm_affine(const onnx::NodeProto& n) {
  const std::string& op = n.op_type();
  if (op == "LayerNormalization") return std::pair{1, 2};
  if (op == "RMSNormalization" || op == "SimplifiedLayerNormalization") return std::pair{1, -1};
  if (n.domain() == "com.microsoft" && op == "SkipLayerNormalization") return std::pair{2, 3};
  if (n.domain() == "com.microsoft" && op == "SkipSimplifiedLayerNormalization") return std::pair{2, -1};
  return std::nullopt;
}

// A quantized activation between the edited constants and x that smoothing rescales too: x = other * scaled (other
// empty: x = scaled + constant), so its rounding reaches x as other * (its rounding error).
struct Factor {
  std::string scaled, other;
};

// A node between the norm and x that moves, picks or pools rows without mixing channels (selection_op), and its
// data input; whether it keeps channel j at index j of the last axis is checked against the input's rank and channel
// count as the samples show them (keeps_channels), which the graph alone does not give.
struct Selection {
  int node = -1;
  std::string input;
};

struct Plan {
  std::vector<Edit> edits;
  std::vector<Factor> factors;  // the one next to x, if any (deeper ones are not modelled)
  std::vector<Selection> selections;
};

// Ops that keep each row's channels together: a classifier head reads the class token (Gather / Slice), the EOT
// token (Flatten, Gather, Reshape) or the mean over positions (ReduceMean) of a norm's output, and Swin partitions
// windows by Reshape / Transpose. Dividing channel j of their input by s_j divides channel j of their output by s_j
// (positive s: max and min commute with it too) when the channel axis stays last and whole (keeps_channels).
bool selection_op(const onnx::NodeProto& n) {
  static const std::set<std::string> ops = {"Gather",    "Slice",     "Transpose",  "Reshape",   "Flatten",
                                            "Squeeze",   "Unsqueeze", "ReduceMean", "ReduceSum", "ReduceMax",
                                            "ReduceMin", "Identity"};
  return (n.domain().empty() || n.domain() == "ai.onnx") && n.input_size() >= 1 && n.output_size() == 1 &&
         ops.count(n.op_type());
}

bool shape_reader(const onnx::NodeProto& n) { return n.op_type() == "Shape" || n.op_type() == "Size"; }

// Node p alone reads y's values: other readers are Shape / Size, which see only y's shape (smoothing keeps it, and
// exports with dynamic axes read the shape of what they reshape); y is no graph output and not read in a subgraph.
bool sole_value_reader(const Graph& g, const std::string& y, int p) {
  if (g.is_graph_output(y) || g.used_by_subgraph(y)) return false;
  const auto& cons = g.consumers(y);
  return std::all_of(cons.begin(), cons.end(), [&](int c) {
    return c == p || shape_reader(g.node(c));
  });
}

// The integer list of attribute `attr`, or of constant input `input` where the opset moved it there; nullopt when
// that input is computed at run time, an empty list when neither is given.
std::optional<std::vector<int64_t>> int_list(const Graph& g, const onnx::NodeProto& n, const std::string& attr,
                                             int input) {
  if (n.input_size() > input && !n.input(input).empty()) {
    if (!g.is_initializer(n.input(input))) return std::nullopt;
    const Tensor t = g.initializer_tensor(n.input(input));
    if (t.dtype() != DType::Int64 && t.dtype() != DType::Int32) return std::nullopt;
    std::vector<int64_t> v(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i)
      v[i] = t.dtype() == DType::Int64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
    return v;
  }
  return attr_ints(n, attr);
}

// Whether selection node n maps channel j of its input (rank r; the samples showed k channels on its last axis,
// and k on its output's) to channel j of its output. Reshape, Flatten, Squeeze, Unsqueeze, Identity: row-major, so
// with k on both last axes the channel is the flat index mod k on both sides. The others: no axis they act on (or
// ReduceMean's reduced axes) is the last.
bool keeps_channels(const Graph& g, const onnx::NodeProto& n, int64_t r) {
  const std::string& op = n.op_type();
  auto last = [r](int64_t a) { return (a < 0 ? a + r : a) == r - 1; };
  if (op == "Gather") return !last(attr_int(n, "axis", 0));
  if (op == "Transpose") {
    const std::vector<int64_t> perm = attr_ints(n, "perm");
    return static_cast<int64_t>(perm.size()) == r && perm.back() == r - 1;
  }
  if (op == "Slice") {
    const auto starts = int_list(g, n, "starts", 1);
    auto axes = int_list(g, n, "axes", 3);
    if (!starts || !axes) return false;
    if (axes->empty())
      for (int64_t a = 0; a < static_cast<int64_t>(starts->size()); ++a) axes->push_back(a);
    return std::none_of(axes->begin(), axes->end(), last);
  }
  if (op.rfind("Reduce", 0) == 0) {
    const auto axes = int_list(g, n, "axes", 1);
    if (!axes) return false;
    if (axes->empty()) return attr_int(n, "noop_with_empty_axes", 0) != 0;  // else every axis, the last included
    return std::none_of(axes->begin(), axes->end(), last);
  }
  return true;  // Reshape, Flatten, Squeeze, Unsqueeze, Identity
}

// The edits that divide channel j of `x` (k channels on its last axis) by s_j, or nullopt.
std::optional<Plan> plan(const Graph& g, const std::string& x, int64_t k, int depth = 0) {
  const int p = g.producer(x);
  if (p < 0 || depth > 8) return std::nullopt;
  const onnx::NodeProto& n = g.node(p);
  const std::string& op = n.op_type();
  if (n.output_size() < 1 || n.output(0) != x) return std::nullopt;
  if (auto affine = norm_affine(n)) {
    const auto [scale, bias] = *affine;
    if (n.input_size() <= scale || !channel_vector(g, n.input(scale), k)) return std::nullopt;
    Plan e{{{Edit::Vector, n.input(scale)}}, {}};
    if (bias >= 0 && n.input_size() > bias && !n.input(bias).empty()) {
      if (!channel_vector(g, n.input(bias), k)) return std::nullopt;
      e.edits.push_back({Edit::Vector, n.input(bias)});
    }
    return e;
  }
  if (selection_op(n)) {  // x picks, pools or moves rows of y: y's channels scale x's (checked: keeps_channels)
    if (!sole_value_reader(g, n.input(0), p)) return std::nullopt;
    auto e = plan(g, n.input(0), k, depth + 1);
    if (e) e->selections.push_back({p, n.input(0)});
    return e;
  }
  if (!n.domain().empty() || n.input_size() != 2) return std::nullopt;
  if (op == "MatMul") {  // x = Z W: W's columns
    const onnx::TensorProto* w = g.initializer(n.input(1));
    if (!own_constant(g, n.input(1)) || w->dims_size() != 2 || w->dims(1) != k) return std::nullopt;
    return Plan{{{Edit::Columns, n.input(1)}}, {}};
  }
  if (op != "Mul" && op != "Add") return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const std::string &c = n.input(side), &y = n.input(1 - side);
    if (!g.is_initializer(c)) continue;
    if (!channel_vector(g, c, k)) return std::nullopt;
    if (op == "Mul") return Plan{{{Edit::Vector, c}}, {}};  // x = y * c
    if (!g.has_single_reader(y)) return std::nullopt;       // x = y + c: y scales too
    auto e = plan(g, y, k, depth + 1);
    if (!e) return e;
    e->edits.push_back({Edit::Vector, c});
    e->factors = depth == 0 ? std::vector<Factor>{{y, ""}} : std::vector<Factor>{};
    return e;
  }
  if (op != "Mul") return std::nullopt;  // Add of two activations: both would have to scale
  for (int side = 1; side >= 0; --side)  // x = a * b: one factor scaling is enough
    if (g.has_single_reader(n.input(side)))
      if (auto e = plan(g, n.input(side), k, depth + 1)) {
        e->factors = depth == 0 ? std::vector<Factor>{{n.input(side), n.input(1 - side)}} : std::vector<Factor>{};
        return e;
      }
  return std::nullopt;
}

// Reader of a smoothed tensor: its weight and the weight's axis that x's channels index (K), or nullopt.
struct Reader {
  std::string weight;
  int k_axis = 0;
  int node = -1;  // the reader's node index (site_of sets it)
};
std::optional<Reader> weight_reader(const Graph& g, const onnx::NodeProto& n, const std::string& x) {
  const bool gemm = n.op_type() == "Gemm";
  if (!n.domain().empty() || (n.op_type() != "MatMul" && !gemm) || n.input_size() < 2 || n.input(0) != x ||
      n.input(1) == x)
    return std::nullopt;
  if (gemm && (attr_int(n, "transA", 0) != 0 || (n.input_size() > 2 && n.input(2) == x))) return std::nullopt;
  const onnx::TensorProto* w = g.initializer(n.input(1));
  if (!own_constant(g, n.input(1)) || w->dims_size() != 2) return std::nullopt;
  return Reader{n.input(1), gemm && attr_int(n, "transB", 0) != 0 ? 1 : 0};
}

// Where 1/s goes. Folded: into constants that produce x (`plan`), exact in float, no node added. Divided: no
// producer can take it (x is also read by a residual Add or a graph output, or made by a GELU, a ReLU, an attention
// product), so a Mul(x, 1/s) is inserted before the weight readers, which read its output instead; x is unchanged
// for its other readers. The Mul runs in float (its constant would need per-channel grids: kSmoothingDivisor) and its
// output takes the readers' Q/DQ in place of x's.
struct Site {
  std::string x;
  int64_t k = 0;
  std::vector<Reader> readers;
  Plan plan;
  bool divided = false;
};

std::optional<Site> site_of(const Graph& g, const std::string& x) {
  if (g.used_by_subgraph(x) || g.is_initializer(x) || g.consumers(x).empty()) return std::nullopt;
  Site s;
  s.x = x;
  bool others = g.is_graph_output(x);  // readers that must keep x itself
  for (int r : g.consumers(x)) {
    if (shape_reader(g.node(r))) continue;  // sees x's shape only
    auto reader = weight_reader(g, g.node(r), x);
    if (!reader) {
      others = true;
      continue;
    }
    const int64_t k = g.initializer(reader->weight)->dims(reader->k_axis);
    if (s.k != 0 && k != s.k) return std::nullopt;
    s.k = k;
    reader->node = r;
    s.readers.push_back(*reader);
  }
  if (s.readers.empty()) return std::nullopt;
  if (auto p = others ? std::nullopt : plan(g, x, s.k)) {
    s.plan = std::move(*p);
    return s;
  }
  s.divided = true;
  return s;
}

// Multiplies index j of axis `axis` of 2-D `t` (or of the last axis of a channel vector) by f[j].
Tensor scaled(const Tensor& t, int axis, const std::vector<float>& f) {
  Tensor out = t.clone();
  float* d = out.data<float>();
  const int64_t cols = t.dim(t.rank() - 1), rows = t.numel() / cols;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) d[r * cols + c] *= f[static_cast<size_t>(axis == 0 && t.rank() == 2 ? r : c)];
  return out;
}

// A reader's weight as [K, N] (a Gemm's transB weight is [N, K]).
Tensor as_k_by_n(const Tensor& w, int k_axis) {
  if (k_axis == 0) return w;
  const int64_t n = w.dim(0), k = w.dim(1);
  std::vector<float> t(static_cast<size_t>(w.numel()));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < k; ++j) t[static_cast<size_t>(j * n + i)] = w.data<float>()[i * k + j];
  return Tensor::from_vector<float>({k, n}, t);
}

// The rounding error Q(v) - v of rows v (channel j multiplied by inv[j]) on one uint8 grid over the fitted range
// [min_j fit_min_j inv_j, max_j fit_max_j inv_j] (0 included); values beyond it clip.
std::vector<double> uint8_rounding(const std::vector<float>& rows, const SmoothingStats& st,
                                   const std::vector<float>& inv) {
  double lo = 0, hi = 0;
  for (size_t j = 0; j < inv.size(); ++j)
    lo = std::min(lo, st.fit_min[j] * inv[j]), hi = std::max(hi, st.fit_max[j] * inv[j]);
  const double step = hi > lo ? (hi - lo) / 255 : 1;
  std::vector<double> d(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const double v = double(rows[i]) * inv[i % inv.size()];
    d[i] = lo + std::clamp(std::round((v - lo) / step), 0.0, 255.0) * step - v;
  }
  return d;
}

// sum over the rows of |x W' - (x + dx) Q(W')|^2 relative to |x W'|^2, W' = W with row j multiplied by s_j (when
// given; the rows x already divided by s), Q(W') one symmetric int8 grid per column, dx the rounding error that
// reaches x (its own and that of the quantized factors that produce it). Rounding is all that differs from the
// float product, which smoothing leaves unchanged.
double rounding_error(const std::vector<float>& rows, const std::vector<double>& dx, const Tensor& w,
                      const std::vector<float>* s) {
  const int64_t k = w.dim(0), n = w.dim(1), m = static_cast<int64_t>(rows.size()) / std::max<int64_t>(1, k);
  if (m == 0) return 0;
  std::vector<double> ws(static_cast<size_t>(k * n)), wq(ws.size());
  for (int64_t j = 0; j < k; ++j)
    for (int64_t c = 0; c < n; ++c) ws[j * n + c] = double(w.data<float>()[j * n + c]) * (s ? (*s)[j] : 1.0f);
  for (int64_t c = 0; c < n; ++c) {
    double top = 0;
    for (int64_t j = 0; j < k; ++j) top = std::max(top, std::fabs(ws[j * n + c]));
    const double step = top > 0 ? top / 127 : 1;
    for (int64_t j = 0; j < k; ++j) wq[j * n + c] = std::round(ws[j * n + c] / step) * step;
  }
  double err = 0, ref = 0;
  std::vector<double> exact(static_cast<size_t>(n)), rounded(static_cast<size_t>(n));
  for (int64_t r = 0; r < m; ++r) {
    std::fill(exact.begin(), exact.end(), 0.0);
    std::fill(rounded.begin(), rounded.end(), 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const auto i = static_cast<size_t>(r * k + j);
      const double x = rows[i], xq = x + dx[i];
      for (int64_t c = 0; c < n; ++c) {
        exact[c] += x * ws[j * n + c];
        rounded[c] += xq * wq[j * n + c];
      }
    }
    for (int64_t c = 0; c < n; ++c) {
      err += (exact[c] - rounded[c]) * (exact[c] - rounded[c]);
      ref += exact[c] * exact[c];
    }
  }
  return ref > 0 ? err / ref : 0;
}

// The rounding error that reaches x's sampled rows (written to scaled_rows) with channel j multiplied by inv[j]:
// x's own and that of the plan's factor; nullopt when the factor's rows do not line up with x's (broadcast).
std::optional<std::vector<double>> input_rounding(const std::map<std::string, SmoothingStats>& stats,
                                                  const std::string& x, const Plan& plan,
                                                  const std::vector<float>& inv, std::vector<float>& scaled_rows) {
  const SmoothingStats& sx = stats.at(x);
  const size_t k = inv.size();
  scaled_rows.resize(sx.rows.size());
  for (size_t i = 0; i < sx.rows.size(); ++i) scaled_rows[i] = sx.rows[i] * inv[i % k];
  std::vector<double> dx = uint8_rounding(sx.rows, sx, inv);
  for (const Factor& f : plan.factors) {
    const auto b = stats.find(f.scaled);
    const auto a = f.other.empty() ? stats.end() : stats.find(f.other);
    if (b == stats.end() || b->second.rows.size() != sx.rows.size() || b->second.fit_min.size() != k ||
        (!f.other.empty() && a == stats.end()) || (a != stats.end() && a->second.rows.size() != sx.rows.size()))
      return std::nullopt;
    const std::vector<double> db = uint8_rounding(b->second.rows, b->second, inv);
    for (size_t i = 0; i < dx.size(); ++i) dx[i] += (a == stats.end() ? 1.0 : double(a->second.rows[i])) * db[i];
  }
  return dx;
}

}  // namespace

std::vector<std::string> smoothable_inputs(const Graph& g) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (int i = 0; i < g.node_count(); ++i) {
    const auto& n = g.node(i);
    if ((n.op_type() != "MatMul" && n.op_type() != "Gemm") || n.input_size() < 2) continue;
    if (!seen.insert(n.input(0)).second) continue;
    if (site_of(g, n.input(0))) out.push_back(n.input(0));
  }
  return out;
}

std::vector<std::string> smoothing_tensors(const Graph& g) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& x : smoothable_inputs(g)) {
    if (seen.insert(x).second) out.push_back(x);
    const std::optional<Site> site = site_of(g, x);
    for (const Factor& f : site->plan.factors)
      for (const std::string& t : {f.scaled, f.other})
        if (!t.empty() && seen.insert(t).second) out.push_back(t);
    for (const Selection& sel : site->plan.selections)
      if (seen.insert(sel.input).second) out.push_back(sel.input);
  }
  return out;
}

std::map<std::string, SmoothingStats> smoothing_statistics(const onnx::ModelProto& model,
                                                           const std::vector<std::string>& tensors,
                                                           const std::vector<std::map<std::string, Tensor>>& samples,
                                                           int threads, int64_t max_rows) {
  std::map<std::string, SmoothingStats> out;
  if (tensors.empty() || samples.empty()) return out;
  const std::set<std::string> observed(tensors.begin(), tensors.end());
  const runtime::Session session(model, {.threads = threads, .observed = observed});
  const bool split = samples.size() > 1;
  // Rows kept per held-out sample: an even spread of its rows (sequence positions, tokens), max_rows in all, and at
  // most kSmoothingRowBytes over all tensors (a large model's wide inputs: 2048 rows of 4096 floats are 32 MiB each).
  const auto held_out = static_cast<int64_t>(split ? samples.size() / 2 : 1);
  const auto per_tensor_bytes = kSmoothingRowBytes / static_cast<int64_t>(observed.size());
  bool fit = true, score = true;
  runtime::RunOptions ro;
  ro.tap = [&](const std::string& name, const Tensor& v) {
    if (!observed.count(name) || v.dtype() != DType::Float32 || v.rank() < 1 || v.numel() == 0) return;
    const int64_t k = v.dim(v.rank() - 1), rows = v.numel() / k;
    SmoothingStats& st = out[name];
    if (st.abs_max.empty()) {
      st.abs_max.assign(static_cast<size_t>(k), 0.0);
      st.fit_min.assign(static_cast<size_t>(k), 0.0);
      st.fit_max.assign(static_cast<size_t>(k), 0.0);
    }
    if (static_cast<int64_t>(st.abs_max.size()) != k || (st.rank != 0 && st.rank != v.rank())) {
      st.rank = -1;  // the shape changed between samples: not a channel layout to rely on
      return;
    }
    st.rank = v.rank();
    const float* d = v.data<float>();
    for (int64_t i = 0; i < v.numel(); ++i) {
      const double x = d[i];
      if (!std::isfinite(x)) continue;
      const auto j = static_cast<size_t>(i % k);
      st.abs_max[j] = std::max(st.abs_max[j], std::fabs(x));
      if (fit) st.fit_min[j] = std::min(st.fit_min[j], x), st.fit_max[j] = std::max(st.fit_max[j], x);
    }
    if (!score) return;
    const int64_t cap = std::clamp<int64_t>(per_tensor_bytes / (k * int64_t{sizeof(float)}), 1, max_rows);
    const int64_t take = std::min(rows, std::max<int64_t>(1, cap / held_out));
    for (int64_t t = 0; t < take; ++t) {
      const float* row = d + (t * rows / take) * k;
      st.rows.insert(st.rows.end(), row, row + k);
    }
  };
  for (size_t i = 0; i < samples.size(); ++i) {  // in sample order: the same rows for any thread count
    fit = !split || i % 2 == 0;
    score = !split || i % 2 == 1;
    session.run(samples[i], ro);
  }
  return out;
}

SmoothingReport smooth_activations(Graph& g, const std::map<std::string, SmoothingStats>& stats, double alpha) {
  SmoothingReport report;
  for (const std::string& x : smoothable_inputs(g)) {
    const auto st = stats.find(x);
    std::optional<Site> site = site_of(g, x);  // again: an earlier site may have taken a shared constant
    if (st == stats.end() || !site || static_cast<int64_t>(st->second.abs_max.size()) != site->k) continue;
    const bool channels_kept = std::all_of(site->plan.selections.begin(), site->plan.selections.end(), [&](const auto& sel) {
      const auto y = stats.find(sel.input);
      return y != stats.end() && y->second.rank > 0 && static_cast<int64_t>(y->second.abs_max.size()) == site->k &&
             keeps_channels(g, g.node(sel.node), y->second.rank);
    });
    if (!channels_kept) {  // a selection mixes channels on the way: the norm's channel j is not x's, so divide x
      site->plan = Plan{};
      site->divided = true;
    }
    std::vector<Tensor> weights;
    for (const Reader& r : site->readers) weights.push_back(as_k_by_n(g.initializer_tensor(r.weight), r.k_axis));
    std::vector<double> w_max(static_cast<size_t>(site->k), 0.0);
    for (const Tensor& w : weights)
      for (int64_t i = 0; i < w.numel(); ++i) {
        const auto j = static_cast<size_t>(i / w.dim(1));
        w_max[j] = std::max(w_max[j], std::fabs(double(w.data<float>()[i])));
      }
    // s from the channel maxima of `abs_max` (0 < alpha <= 1); 1 where a channel or a weight row is all zeros.
    auto scales = [&](const std::vector<double>& x_max) {
      std::vector<float> f(w_max.size(), 1.0f);
      for (size_t j = 0; j < f.size(); ++j) {
        const double a = x_max[j], w = w_max[j];
        if (a <= 0 || w <= 0 || !std::isfinite(a) || !std::isfinite(w)) continue;
        const double v = std::pow(a, alpha) / std::pow(w, 1 - alpha);
        if (std::isfinite(v) && v > 0) f[j] = static_cast<float>(v);
      }
      return f;
    };
    std::vector<double> fit_max(w_max.size());
    for (size_t j = 0; j < fit_max.size(); ++j)
      fit_max[j] = std::max(std::fabs(st->second.fit_min[j]), std::fabs(st->second.fit_max[j]));
    const std::vector<float> s_fit = scales(fit_max);
    std::vector<float> inv_fit(s_fit.size());
    for (size_t j = 0; j < s_fit.size(); ++j) inv_fit[j] = 1.0f / s_fit[j];
    const std::vector<float> ones(w_max.size(), 1.0f);
    std::vector<float> rows, smoothed_rows;
    const auto dx_before = input_rounding(stats, x, site->plan, ones, rows);
    const auto dx_after = input_rounding(stats, x, site->plan, inv_fit, smoothed_rows);
    if (!dx_before || !dx_after) continue;
    double before = 0, after = 0;
    for (const Tensor& w : weights) {
      before += rounding_error(rows, *dx_before, w, nullptr);
      after += rounding_error(smoothed_rows, *dx_after, w, &s_fit);
    }
    // A divided site adds a float pass over x (the Mul), and its estimate leaves things out: a clear gain on enough
    // held-out rows (kDividedMinGainDb, kDividedMinRows).
    const bool apply = site->divided ? static_cast<int64_t>(rows.size()) >= kDividedMinRows * site->k &&
                                           after * std::pow(10.0, kDividedMinGainDb / 10) < before
                                     : after < before;
    report.tensors.push_back({x, before, after, apply, site->divided});
    if (!apply) continue;
    const std::vector<float> s = scales(st->second.abs_max);
    std::vector<float> inv(s.size());
    for (size_t j = 0; j < s.size(); ++j) inv[j] = 1.0f / s[j];
    for (const Reader& r : site->readers)
      g.set_initializer(r.weight, scaled(g.initializer_tensor(r.weight), r.k_axis, s));
    for (const Edit& e : site->plan.edits)
      g.set_initializer(e.tensor, scaled(g.initializer_tensor(e.tensor), e.kind == Edit::Columns ? 1 : -1, inv));
    if (site->divided) {
      const std::string divisor = g.unique_name(x + "_smooth_inv"), y = g.unique_name(x + "_smoothed");
      g.set_initializer(divisor, Tensor::from_vector<float>({site->k}, inv));
      onnx::NodeProto mul;
      mul.set_op_type("Mul");
      mul.set_name(g.unique_name(x + "/SmoothQuantDivide"));
      mul.set_doc_string(kSmoothingDivisor);
      mul.add_input(x);
      mul.add_input(divisor);
      mul.add_output(y);
      int first = g.node_count();
      for (const Reader& r : site->readers) first = std::min(first, r.node);
      g.insert_before(first, std::move(mul));
      for (const Reader& r : site->readers) g.set_input(r.node, 0, y);
      ++report.divided;
    }
    ++report.applied;
  }
  g.compact();
  return report;
}

}  // namespace qtool::quantize
