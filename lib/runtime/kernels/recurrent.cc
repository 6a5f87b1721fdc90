// LSTM, GRU and RNN (opsets 1-21), float32, forward / reverse / bidirectional.
//
// Inputs X [seq, batch, in] (layout 1: [batch, seq, in]), W [dirs, G*H, in], R [dirs, G*H, H],
// B [dirs, 2*G*H] (Wb then Rb), sequence_lens [batch], initial_h [dirs, batch, H], LSTM also initial_c and
// P [dirs, 3H] (peepholes i, o, f). Gate order: LSTM i, o, f, c; GRU z, r, h; RNN one gate.
//   LSTM: i = f(x Wi + h Ri + Pi*c + b), f' = f(x Wf + h Rf + Pf*c + b) (1 - i with input_forget),
//         c~ = g(x Wc + h Rc + b), C = f'*C + i*c~, o = f(x Wo + h Ro + Po*C + b), H = o*h(C)
//   GRU:  z = f(x Wz + h Rz + b), r = f(x Wr + h Rr + b),
//         h~ = g(x Wh + (r*H) Rh + Rbh + Wbh)  or, with linear_before_reset, g(x Wh + r*(H Rh + Rbh) + Wbh),
//         H = (1-z)*h~ + z*H
//   RNN:  H = f(x Wi + h Ri + b)
// `clip` bounds every gate pre-activation. Activations default to Sigmoid/Tanh/Tanh (LSTM), Sigmoid/Tanh
// (GRU), Tanh (RNN); activation_alpha/beta are consumed in order by the functions that take them.
// Steps at or past sequence_lens[b] leave Y zero and the state unchanged (reverse starts at len-1).
// Outputs Y [seq, dirs, batch, H] (layout 1: [batch, seq, dirs, H]), Y_h [dirs, batch, H], LSTM Y_c.
// The input projection for all steps is one sgemm per direction; each step is one sgemm over the batch.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {
using namespace compute;

enum class Cell { LSTM, GRU, RNN };
enum class Act {
  Sigmoid,
  Tanh,
  Relu,
  Affine,
  LeakyRelu,
  ThresholdedRelu,
  ScaledTanh,
  HardSigmoid,
  Elu,
  Softsign,
  Softplus
};

struct Activation {
  Act kind = Act::Sigmoid;
  float alpha = 0, beta = 0;
  float operator()(float x) const {
    switch (kind) {
      case Act::Sigmoid:
        return 1.f / (1.f + std::exp(-x));
      case Act::Tanh:
        return std::tanh(x);
      case Act::Relu:
        return x > 0 ? x : 0;
      case Act::Affine:
        return alpha * x + beta;
      case Act::LeakyRelu:
        return x >= 0 ? x : alpha * x;
      case Act::ThresholdedRelu:
        return x > alpha ? x : 0;
      case Act::ScaledTanh:
        return alpha * std::tanh(beta * x);
      case Act::HardSigmoid:
        return std::clamp(alpha * x + beta, 0.f, 1.f);
      case Act::Elu:
        return x >= 0 ? x : alpha * (std::exp(x) - 1);
      case Act::Softsign:
        return x / (1 + std::fabs(x));
      case Act::Softplus:
        return std::log1p(std::exp(x));
    }
    return x;
  }
};

std::vector<Activation> parse_activations(const NodeInfo& node, Cell cell, int dirs) {
  const Attribute* given = node.attrs.find("activations");
  if (given && given->kind != Attribute::Kind::Strings)
    throw BadInputError(node.label() + ": attribute 'activations' must be a list of strings");
  std::vector<std::string> names = given ? given->strings : std::vector<std::string>{};
  const int per_dir = cell == Cell::LSTM ? 3 : cell == Cell::GRU ? 2 : 1;
  if (names.empty()) {
    const std::vector<std::string> dflt = cell == Cell::LSTM  ? std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"}
                                          : cell == Cell::GRU ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                              : std::vector<std::string>{"Tanh"};
    for (int d = 0; d < dirs; ++d) names.insert(names.end(), dflt.begin(), dflt.end());
  }
  if (static_cast<int>(names.size()) == per_dir && dirs == 2) names.insert(names.end(), names.begin(), names.end());
  if (static_cast<int>(names.size()) != per_dir * dirs)
    throw BadInputError(node.label() + ": 'activations' needs " + std::to_string(per_dir * dirs) + " names");
  const std::vector<float> alphas = node.attrs.get_floats("activation_alpha");
  const std::vector<float> betas = node.attrs.get_floats("activation_beta");
  size_t ai = 0, bi = 0;
  std::vector<Activation> out;
  struct Spec {
    const char* name;
    Act kind;
    bool uses_alpha, uses_beta;
    float alpha, beta;
  };
  const Spec specs[] = {{"sigmoid", Act::Sigmoid, false, false, 0, 0},
                        {"tanh", Act::Tanh, false, false, 0, 0},
                        {"relu", Act::Relu, false, false, 0, 0},
                        {"affine", Act::Affine, true, true, 1, 0},
                        {"leakyrelu", Act::LeakyRelu, true, false, 0.01f, 0},
                        {"thresholdedrelu", Act::ThresholdedRelu, true, false, 1, 0},
                        {"scaledtanh", Act::ScaledTanh, true, true, 1, 1},
                        {"hardsigmoid", Act::HardSigmoid, true, true, 0.2f, 0.5f},
                        {"elu", Act::Elu, true, false, 1, 0},
                        {"softsign", Act::Softsign, false, false, 0, 0},
                        {"softplus", Act::Softplus, false, false, 0, 0}};
  for (const std::string& n : names) {
    std::string lower;
    for (char ch : n) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const Spec* s = nullptr;
    for (const Spec& sp : specs)
      if (lower == sp.name) s = &sp;
    if (!s) throw UnsupportedError(node.label() + ": activation '" + n + "' is not supported");
    Activation a{s->kind, s->alpha, s->beta};
    if (s->uses_alpha && ai < alphas.size()) a.alpha = alphas[ai++];
    if (s->uses_beta && bi < betas.size()) a.beta = betas[bi++];
    out.push_back(a);
  }
  return out;
}

// [a, b, rest] -> [b, a, rest]
Tensor swap01(const Tensor& t) {
  Shape s = t.shape();
  std::swap(s[0], s[1]);
  Tensor out(DType::Float32, s);
  const int64_t A = t.dim(0), B = t.dim(1), R = t.numel() / std::max<int64_t>(1, A * B);
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      std::memcpy(out.data<float>() + (b * A + a) * R, t.data<float>() + (a * B + b) * R, sizeof(float) * R);
  return out;
}

class RecurrentKernel final : public Kernel {
 public:
  RecurrentKernel(const NodeInfo& node, Cell cell) : node_(node), cell_(cell) {
    const std::string dir = node.attrs.get_string("direction", "forward");
    if (dir == "forward")
      dirs_ = 1;
    else if (dir == "reverse")
      dirs_ = 1, reverse_only_ = true;
    else if (dir == "bidirectional")
      dirs_ = 2;
    else
      throw BadInputError(node.label() + ": direction '" + dir + "' is not forward, reverse or bidirectional");
    gates_ = cell == Cell::LSTM ? 4 : cell == Cell::GRU ? 3 : 1;
    acts_ = parse_activations(node, cell, dirs_);
    clip_ = node.attrs.get_float("clip", 0.f);
    has_clip_ = node.attrs.has("clip");
    input_forget_ = node.attrs.get_int("input_forget", 0) != 0;
    linear_before_reset_ = node.attrs.get_int("linear_before_reset", 0) != 0;
    layout_ = node.attrs.get_int("layout", 0);
    hidden_ = node.attrs.get_int("hidden_size", 0);
  }

  void run(KernelContext& ctx) override {
    Tensor X = float_input(ctx, 0);
    const Tensor& W = float_input(ctx, 1);
    const Tensor& R = float_input(ctx, 2);
    if (X.rank() != 3 || W.rank() != 3 || R.rank() != 3)
      throw BadInputError(node_.label() + ": X, W and R must be 3-D");
    if (layout_ == 1) X = swap01(X);
    const int64_t S = X.dim(0), Bn = X.dim(1), I = X.dim(2), H = R.dim(2), G = gates_;
    if ((hidden_ && hidden_ != H) || W.dim(0) != dirs_ || W.dim(1) != G * H || W.dim(2) != I || R.dim(0) != dirs_ ||
        R.dim(1) != G * H)
      throw BadInputError(node_.label() + ": W " + shape_str(W.shape()) + " / R " + shape_str(R.shape()) +
                          " do not match X " + shape_str(X.shape()) + " with " + std::to_string(dirs_) +
                          " direction(s) and hidden size " + std::to_string(H));
    auto opt = [&](size_t i, int64_t numel, const char* what) -> const float* {
      if (!ctx.has_input(i)) return nullptr;
      const Tensor& t = float_input(ctx, i);
      if (t.numel() != numel)
        throw BadInputError(node_.label() + ": input '" + what + "' has " + std::to_string(t.numel()) +
                            " values, expected " + std::to_string(numel));
      return t.data<float>();
    };
    const float* bias = opt(3, dirs_ * 2 * G * H, "B");
    std::vector<int64_t> lens(Bn, S);
    if (ctx.has_input(4)) {
      lens = read_ints(ctx.input(4), node_, "sequence_lens");
      if (static_cast<int64_t>(lens.size()) != Bn)
        throw BadInputError(node_.label() + ": sequence_lens needs one value per batch");
      for (int64_t l : lens)
        if (l < 0 || l > S)
          throw BadInputError(node_.label() + ": sequence_lens value " + std::to_string(l) + " is out of range");
    }
    auto state_input = [&](size_t i, const char* what) {
      if (!ctx.has_input(i)) return std::vector<float>(dirs_ * Bn * H, 0.f);
      Tensor t = float_input(ctx, i);
      if (layout_ == 1) t = swap01(t);
      if (t.numel() != dirs_ * Bn * H)
        throw BadInputError(node_.label() + ": input '" + what + "' must be [" + std::to_string(dirs_) + "," +
                            std::to_string(Bn) + "," + std::to_string(H) + "]");
      return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
    };
    std::vector<float> h_state = state_input(5, "initial_h");
    std::vector<float> c_state = cell_ == Cell::LSTM ? state_input(6, "initial_c") : std::vector<float>();
    const float* peep = cell_ == Cell::LSTM ? opt(7, dirs_ * 3 * H, "P") : nullptr;

    Tensor Y = Tensor::zeros(DType::Float32, {S, dirs_, Bn, H});
    std::vector<float> xw(S * Bn * G * H), hr(Bn * G * H), rh(Bn * H);
    const int per_dir = cell_ == Cell::LSTM ? 3 : cell_ == Cell::GRU ? 2 : 1;
    for (int d = 0; d < dirs_; ++d) {
      const bool reverse = reverse_only_ || d == 1;
      const float* w = W.data<float>() + d * G * H * I;
      const float* r = R.data<float>() + d * G * H * H;
      const float* wb = bias ? bias + d * 2 * G * H : nullptr;
      const float* rb = bias ? wb + G * H : nullptr;
      const Activation* act = &acts_[d * per_dir];
      // Input projection for every step: xw[t*Bn + b] = X[t, b] W^T + Wb (+ Rb where it is additive).
      sgemm(false, true, S * Bn, G * H, I, 1.f, X.data<float>(), I, w, I, 0.f, xw.data(), G * H, ctx.threads);
      if (bias)
        for (int64_t row = 0; row < S * Bn; ++row)
          for (int64_t j = 0; j < G * H; ++j) {
            const bool rb_inside = cell_ == Cell::GRU && linear_before_reset_ && j >= 2 * H;
            xw[row * G * H + j] += wb[j] + (rb_inside ? 0.f : rb[j]);
          }
      float* h = h_state.data() + d * Bn * H;
      float* c = cell_ == Cell::LSTM ? c_state.data() + d * Bn * H : nullptr;
      const float* pd = peep ? peep + d * 3 * H : nullptr;
      const int64_t max_len = *std::max_element(lens.begin(), lens.end());
      for (int64_t s = 0; s < max_len; ++s) {
        // Recurrent term for the whole batch (GRU without linear_before_reset: z and r gates only).
        const int64_t ng = cell_ == Cell::GRU && !linear_before_reset_ ? 2 : G;
        sgemm(false, true, Bn, ng * H, H, 1.f, h, H, r, H, 0.f, hr.data(), G * H, 1);
        if (cell_ == Cell::GRU && !linear_before_reset_) {
          // r gate first, then (r * H) Rh^T.
          for (int64_t b = 0; b < Bn; ++b) {
            if (s >= lens[b]) continue;
            const int64_t t = reverse ? lens[b] - 1 - s : s;
            const float* x = &xw[(t * Bn + b) * G * H];
            for (int64_t j = 0; j < H; ++j) {
              const float rg = act[0](clip(x[H + j] + hr[b * G * H + H + j]));
              rh[b * H + j] = rg * h[b * H + j];
            }
          }
          sgemm(false, true, Bn, H, H, 1.f, rh.data(), H, r + 2 * H * H, H, 0.f, hr.data() + 2 * H, G * H, 1);
        }
        for (int64_t b = 0; b < Bn; ++b) {
          if (s >= lens[b]) continue;
          const int64_t t = reverse ? lens[b] - 1 - s : s;
          const float* x = &xw[(t * Bn + b) * G * H];
          const float* g = &hr[b * G * H];
          float* hb = h + b * H;
          float* yb = Y.data<float>() + ((t * dirs_ + d) * Bn + b) * H;
          for (int64_t j = 0; j < H; ++j) {
            if (cell_ == Cell::RNN) {
              hb[j] = act[0](clip(x[j] + g[j]));
            } else if (cell_ == Cell::GRU) {
              const float z = act[0](clip(x[j] + g[j]));
              float hh;
              if (linear_before_reset_) {
                const float rg = act[0](clip(x[H + j] + g[H + j]));
                hh = act[1](clip(x[2 * H + j] + rg * (g[2 * H + j] + (rb ? rb[2 * H + j] : 0.f))));
              } else {
                hh = act[1](clip(x[2 * H + j] + g[2 * H + j]));
              }
              hb[j] = (1 - z) * hh + z * hb[j];
            } else {
              float* cb = c + b * H;
              const float ci = cb[j];
              const float ig = act[0](clip(x[j] + g[j] + (pd ? pd[j] * ci : 0.f)));
              const float fg =
                  input_forget_ ? 1 - ig : act[0](clip(x[2 * H + j] + g[2 * H + j] + (pd ? pd[2 * H + j] * ci : 0.f)));
              const float cc = act[1](clip(x[3 * H + j] + g[3 * H + j]));
              const float cn = fg * ci + ig * cc;
              const float og = act[0](clip(x[H + j] + g[H + j] + (pd ? pd[H + j] * cn : 0.f)));
              cb[j] = cn;
              hb[j] = og * act[2](cn);
            }
            yb[j] = hb[j];
          }
        }
      }
    }
    Tensor Yh = Tensor::from_vector<float>({dirs_, Bn, H}, h_state);
    if (layout_ == 1) {
      // [S, D, B, H] -> [B, S, D, H]
      Tensor Yl(DType::Float32, {Bn, S, dirs_, H});
      for (int64_t t = 0; t < S; ++t)
        for (int64_t d = 0; d < dirs_; ++d)
          for (int64_t b = 0; b < Bn; ++b)
            std::memcpy(Yl.data<float>() + ((b * S + t) * dirs_ + d) * H,
                        Y.data<float>() + ((t * dirs_ + d) * Bn + b) * H, sizeof(float) * H);
      Y = Yl;
      Yh = swap01(Yh);
    }
    ctx.outputs[0] = Y;
    if (ctx.outputs.size() > 1) ctx.outputs[1] = Yh;
    if (ctx.outputs.size() > 2 && cell_ == Cell::LSTM) {
      Tensor Yc = Tensor::from_vector<float>({dirs_, Bn, H}, c_state);
      ctx.outputs[2] = layout_ == 1 ? swap01(Yc) : Yc;
    }
  }

 private:
  float clip(float v) const { return has_clip_ ? std::clamp(v, -clip_, clip_) : v; }

  NodeInfo node_;
  Cell cell_;
  int dirs_ = 1;
  bool reverse_only_ = false;
  int64_t gates_ = 1;
  std::vector<Activation> acts_;
  float clip_ = 0;
  bool has_clip_ = false, input_forget_ = false, linear_before_reset_ = false;
  int64_t layout_ = 0, hidden_ = 0;
};

}  // namespace

std::unique_ptr<Kernel> make_lstm(const NodeInfo& node) { return std::make_unique<RecurrentKernel>(node, Cell::LSTM); }
std::unique_ptr<Kernel> make_gru(const NodeInfo& node) { return std::make_unique<RecurrentKernel>(node, Cell::GRU); }
std::unique_ptr<Kernel> make_rnn(const NodeInfo& node) { return std::make_unique<RecurrentKernel>(node, Cell::RNN); }

}  // namespace qtool::runtime::kernels
