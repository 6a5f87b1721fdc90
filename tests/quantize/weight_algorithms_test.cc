// Weight algorithms (lib/quantize/weights): clip search lowers the weight's reconstruction error and GPTQ and AWQ the
// layer-output error below round to nearest's, on tiny inline weights and on every 2-D MatMul/Gemm weight of the
// shared models (int4, blocks of 32 along the reduction axis, and int8 per output channel), with the Hessians of
// the layers' inputs on one real input per model.
#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "onnx/model_io.h"
#include "onnx/tensor_proto.h"
#include "quantize/op_roles.h"
#include "numerics/qdq.h"
#include "quantize/weights/double_quant.h"
#include "quantize/weights/layer_inputs.h"
#include "quantize/weights/weight_quantizer.h"
#include "tensorio/tensorio.h"
#include "test_paths.h"

using namespace qtool;
using namespace qtool::quantize;

namespace {

TensorSettings int4_blocks(WeightAlgorithm a) {
  TensorSettings s;
  s.dtype = DType::Int4;
  s.symmetric = true;
  s.granularity = Granularity::PerBlock;
  s.block_size = 32;
  s.algorithm = a;
  return s;
}

TensorSettings int8_channels(WeightAlgorithm a) {
  TensorSettings s;
  s.dtype = DType::Int8;
  s.symmetric = true;
  s.granularity = Granularity::PerChannel;
  s.algorithm = a;
  return s;
}

struct Errors {
  double rtn_w, clip_w, rtn_out, gptq_out, awq_out;
};

// W: [K, N] (k_axis 0) or [N, K] (k_axis 1).
Errors errors_of(const Tensor& w, int64_t k_axis, bool blocked, const LayerHessian& h) {
  Errors e{};
  const int64_t axis = blocked ? k_axis : 1 - k_axis;
  auto run = [&](WeightAlgorithm a) {
    const TensorSettings s = blocked ? int4_blocks(a) : int8_channels(a);
    WeightInput in{w, s, axis, k_axis, &h};
    return quantize_weight_values(in);
  };
  // GPTQ's core, whatever the Hessian's rows: one sample gives fewer rows than columns on some layers, where
  // quantize_weight_values rounds to nearest instead (gptq_has_rows); the in-sample error is the core's claim.
  const TensorSettings gs = blocked ? int4_blocks(WeightAlgorithm::Gptq) : int8_channels(WeightAlgorithm::Gptq);
  const WeightResult rtn = run(WeightAlgorithm::Rtn), clip = run(WeightAlgorithm::ClipSearch),
                     gptq = quantize_gptq(WeightInput{w, gs, axis, k_axis, &h}), awq = run(WeightAlgorithm::Awq);
  e.rtn_w = rtn.error;
  e.clip_w = clip.error;
  e.rtn_out = output_sse(w, rtn.codes, rtn.params, k_axis, h);
  e.gptq_out = gptq.error;
  e.awq_out = awq.error;
  CHECK(std::string(gptq.metric) == "output_sse");
  CHECK(std::string(awq.metric) == "output_sse");
  REQUIRE(awq.input_scale);
  // AWQ's error is that of the float layer x W against (x * input_scale) DQ(codes), recomputed here from scratch
  const Tensor dq = numerics::dequantize_linear(awq.codes, awq.params.scale, &awq.params.zero_point, [&] {
    numerics::QdqAttrs a;
    a.axis = awq.params.axis >= 0 ? awq.params.axis : 1;
    a.block_size = awq.params.block_size;
    return a;
  }());
  const int64_t K = h.k, N = w.dim(1 - k_axis);
  double direct = 0;
  std::vector<double> d(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int64_t i = k_axis == 0 ? k * N + n : n * K + k;
      d[static_cast<size_t>(k)] = static_cast<double>(w.data<float>()[i]) -
                                  static_cast<double>(awq.input_scale->data<float>()[k]) * dq.data<float>()[i];
    }
    for (int64_t r = 0; r < K; ++r)
      for (int64_t c = 0; c < K; ++c)
        direct += d[static_cast<size_t>(r)] * h.h[static_cast<size_t>(r * K + c)] * d[static_cast<size_t>(c)];
  }
  CHECK(direct == Approx(awq.error).epsilon(1e-3).margin(1e-9 * (e.rtn_out + 1e-30)));
  CHECK(weight_sse(w, clip.codes, clip.params) == Approx(clip.error));
  return e;
}

Tensor first_rows(const Tensor& t, int64_t n) {
  if (t.rank() == 0 || t.dim(0) <= n) return t;
  Shape s = t.shape();
  s[0] = n;
  Tensor out = Tensor::zeros(t.dtype(), s);
  std::memcpy(out.raw(), t.raw(), storage_bytes(t.dtype(), out.numel()));
  return out;
}

}  // namespace

TEST_CASE("clip search and GPTQ beat round to nearest on a weight with outliers and correlated inputs") {
  const int64_t K = 64, N = 16, rows = 256;
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> wv(static_cast<size_t>(K * N));
  for (auto& v : wv) v = g(rng) * 0.05f;
  for (int64_t n = 0; n < N; ++n) wv[static_cast<size_t>((n * 5 % K) * N + n)] = 0.6f;  // one outlier per column
  const Tensor w = Tensor::from_vector<float>({K, N}, wv);
  // X: rows of correlated features (x_k = z_k + z_{k+1} / 2), H = X^T X.
  LayerHessian h{K, rows, std::vector<double>(static_cast<size_t>(K * K), 0.0)};
  std::vector<double> z(static_cast<size_t>(K + 1)), x(static_cast<size_t>(K));
  for (int64_t r = 0; r < rows; ++r) {
    for (auto& v : z) v = g(rng);
    for (int64_t k = 0; k < K; ++k) x[static_cast<size_t>(k)] = z[static_cast<size_t>(k)] + 0.5 * z[static_cast<size_t>(k + 1)];
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < K; ++j) h.h[static_cast<size_t>(i * K + j)] += x[static_cast<size_t>(i)] * x[static_cast<size_t>(j)];
  }
  for (bool blocked : {true, false}) {
    INFO((blocked ? "int4 blocks of 32" : "int8 per channel"));
    const Errors e = errors_of(w, 0, blocked, h);
    // One step of 8 bits already fits the outlier well: clipping it costs more than it saves (a = 1 stays).
    if (blocked)
      CHECK(e.clip_w < e.rtn_w);
    else
      CHECK(e.clip_w <= e.rtn_w);
    CHECK(e.gptq_out < e.rtn_out);
    CHECK(e.awq_out <= e.rtn_out);
  }
  SECTION("AWQ: input channels with large activations keep more precision") {
    // a few input channels 10x larger (LLM activation outliers): their weights' rounding dominates the output error
    LayerHessian ho = h;
    for (int64_t i = 0; i < K; ++i)
      for (int64_t j = 0; j < K; ++j)
        ho.h[static_cast<size_t>(i * K + j)] *= (i % 16 == 3 ? 10.0 : 1.0) * (j % 16 == 3 ? 10.0 : 1.0);
    const Errors e = errors_of(w, 0, true, ho);
    CHECK(e.awq_out < 0.9 * e.rtn_out);
  }
  SECTION("FP8 per-channel weights: GPTQ rounds to the format's values and beats round to nearest") {
    for (DType dt : {DType::Float8E4M3FN, DType::Float8E5M2}) {
      INFO(dtype_name(dt));
      TensorSettings s = int8_channels(WeightAlgorithm::Rtn);
      s.dtype = dt;
      WeightInput rtn_in{w, s, 1, 0, &h};
      const WeightResult rtn = quantize_weight_values(rtn_in);
      s.algorithm = WeightAlgorithm::Gptq;
      WeightInput gptq_in{w, s, 1, 0, &h};
      const WeightResult gptq = quantize_weight_values(gptq_in);
      CHECK(gptq.codes.dtype() == dt);
      CHECK(gptq.error < 0.8 * output_sse(w, rtn.codes, rtn.params, 0, h));
      // The error it reports is that of the FP8 codes it wrote (GPTQ's q values lie on the format's grid).
      CHECK(output_sse(w, gptq.codes, gptq.params, 0, h) == Approx(gptq.error).epsilon(1e-9));
    }
  }
  SECTION("fewer calibration rows than columns: GPTQ rounds to nearest (gptq_has_rows)") {
    // A Hessian of K / 2 rows (rank K / 2, as mobilenetv2's classifier with 3 images for K = 1280) and one of fresh
    // rows from the same inputs, standing for data calibration never saw.
    auto hessian_of = [&](int64_t n) {
      LayerHessian hn{K, n, std::vector<double>(static_cast<size_t>(K * K), 0.0)};
      for (int64_t r = 0; r < n; ++r) {
        for (auto& v : z) v = g(rng);
        for (int64_t k = 0; k < K; ++k)
          x[static_cast<size_t>(k)] = z[static_cast<size_t>(k)] + 0.5 * z[static_cast<size_t>(k + 1)];
        for (int64_t i = 0; i < K; ++i)
          for (int64_t j = 0; j < K; ++j)
            hn.h[static_cast<size_t>(i * K + j)] += x[static_cast<size_t>(i)] * x[static_cast<size_t>(j)];
      }
      return hn;
    };
    const LayerHessian few = hessian_of(K / 2), fresh = hessian_of(4 * K);
    CHECK_FALSE(gptq_has_rows(few));
    CHECK(gptq_has_rows(hessian_of(K)));
    for (bool blocked : {true, false}) {
      INFO((blocked ? "int4 blocks of 32" : "int8 per channel"));
      TensorSettings s = blocked ? int4_blocks(WeightAlgorithm::Gptq) : int8_channels(WeightAlgorithm::Gptq);
      const int64_t axis = blocked ? 0 : 1;
      const WeightResult got = quantize_weight_values(WeightInput{w, s, axis, 0, &few});
      s.algorithm = WeightAlgorithm::Rtn;
      const WeightResult rtn = quantize_weight_values(WeightInput{w, s, axis, 0, &few});
      CHECK(std::string(got.metric) == "weight_sse");
      REQUIRE(got.codes.numel() == rtn.codes.numel());
      CHECK(std::memcmp(got.codes.raw(), rtn.codes.raw(), storage_bytes(got.codes.dtype(), got.codes.numel())) == 0);
      // Why: the core fits the K / 2 rows it saw (lower error there) and loses on fresh ones.
      s.algorithm = WeightAlgorithm::Gptq;
      const WeightResult core = quantize_gptq(WeightInput{w, s, axis, 0, &few});
      CHECK(core.error < output_sse(w, rtn.codes, rtn.params, 0, few));
      CHECK(output_sse(w, core.codes, core.params, 0, fresh) > output_sse(w, rtn.codes, rtn.params, 0, fresh));
    }
  }
  SECTION("a Gemm transB weight [N, K] is read along its second axis") {
    std::vector<float> t(wv.size());
    for (int64_t k = 0; k < K; ++k)
      for (int64_t n = 0; n < N; ++n) t[static_cast<size_t>(n * K + k)] = wv[static_cast<size_t>(k * N + n)];
    const Errors a = errors_of(w, 0, true, h), b = errors_of(Tensor::from_vector<float>({N, K}, t), 1, true, h);
    CHECK(b.rtn_out == Approx(a.rtn_out).epsilon(1e-9));
    CHECK(b.gptq_out == Approx(a.gptq_out).epsilon(1e-6));
  }
}

TEST_CASE("clip search and GPTQ have lower error than round to nearest on every MatMul/Gemm of the shared models") {
  struct Case {
    const char* model;
    std::vector<std::pair<const char*, const char*>> inputs;
  };
  const std::vector<Case> cases = {
      {"llama2c-aidreams-260k.onnx", {{"input_ids", "llama2c_eval32_first2.npy"}}},
      {"digits-vit.onnx", {{"pixel_values", "digits_test64.npy"}}},
      {"mobilenetv2-1.0-224-fp32.onnx", {{"input", "mobilenetv2_chelsea.npy"}}},
      {"ppocrv4-rec.onnx", {{"x", "ppocrrec_rendered_line0.npy"}}},
      {"ppocr-mobile-v2-cls.onnx", {{"x", "ppocrcls_rendered_line0_upright.npy"}}},
      {"silero-vad-16k-flat.onnx", {{"input", "vad_chunk576_speech.npy"}, {"state", "vad_state_zeros.npy"}}},
      {"cifar10-resnet20.onnx", {{"input", "cifar10_eval50.npz"}}},
  };
  int layers = 0;
  for (const auto& c : cases) {
    const auto path = test::shared_models() / c.model;
    if (!std::filesystem::exists(path)) {
      WARN("shared model missing: " << path);
      continue;
    }
    const onnxio::LoadedModel m = onnxio::load_model(path);
    const onnx::GraphProto& graph = m.proto->graph();
    std::map<std::string, Tensor> sample;
    for (const auto& [name, file] : c.inputs)  // the first input's first sample (batches of 50 or 64 in the files)
      sample[name] = name == c.inputs[0].first ? first_rows(tensorio::read_tensor_file(test::shared_tensors() / file), 1)
                                               : tensorio::read_tensor_file(test::shared_tensors() / file);
    std::map<std::string, const onnx::TensorProto*> inits;
    for (const auto& t : graph.initializer()) inits[t.name()] = &t;
    std::vector<std::string> names;
    for (const auto& n : graph.node())
      if ((n.op_type() == "MatMul" || n.op_type() == "Gemm") && n.input_size() > 1 && inits.count(n.input(1)) &&
          !inits.count(n.input(0)) && inits.at(n.input(1))->dims_size() == 2)
        names.push_back(n.input(0));
    const LayerHessians hs = collect_hessians(*m.proto, names, {sample}, 2);
    for (const auto& n : graph.node()) {
      if ((n.op_type() != "MatMul" && n.op_type() != "Gemm") || n.input_size() < 2 || !inits.count(n.input(1)) ||
          !hs.count(n.input(0)))
        continue;
      const Tensor w = onnxio::tensor_from_proto(*inits.at(n.input(1)));
      if (w.rank() != 2) continue;
      const int64_t k_axis = weight_block_axis(n, 2);
      for (bool blocked : {true, false}) {
        INFO(c.model << " node " << n.name() << " weight " << shape_str(w.shape())
                     << (blocked ? " int4 blocks of 32" : " int8 per channel"));
        const Errors e = errors_of(w, k_axis, blocked, hs.at(n.input(0)));
        if (e.rtn_w == 0) {  // already on an int8 grid (mobilenetv2's classifier was exported from int8): exact
          CHECK(e.clip_w == 0);
          CHECK(e.gptq_out == 0);
          CHECK(e.awq_out <= e.rtn_out);
          continue;
        }
        // int4 blocks: strictly lower. int8 per channel: never higher (a = 1 is RTN); a channel of 64 weights with
        // 255 levels can have nothing worth clipping (cifar10's classifier).
        if (blocked)
          CHECK(e.clip_w < e.rtn_w);
        else
          CHECK(e.clip_w <= e.rtn_w);
        // A layer whose input was all zeros on this sample (silero's state path with a zero state) has no output
        // error to lower.
        if (e.rtn_out > 0) {
          CHECK(e.gptq_out < e.rtn_out);
          // AWQ: int4 blocks strictly lower; int8 per channel never higher (alpha = 0 and no clipping is RTN: two of
          // digits-vit's 64-wide MLP weights gain nothing from either at 255 levels)
          if (blocked)
            CHECK(e.awq_out < e.rtn_out);
          else
            CHECK(e.awq_out <= e.rtn_out);
        } else {
          CHECK(e.gptq_out == 0);
          CHECK(e.awq_out == 0);
        }
      }
      ++layers;
    }
  }
  if (std::filesystem::exists(test::shared_models())) CHECK(layers >= 50);  // 58 when written: a model that stops loading is noticed
}

TEST_CASE("double quantization stores block scales as codes that DequantizeLinear expands to the scale used") {
  const int64_t K = 128, N = 6;  // int4 blocks of 32 along K: scales [4, 6], code groups of 4 along N
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> wv(static_cast<size_t>(K * N));
  for (size_t i = 0; i < wv.size(); ++i) wv[i] = g(rng) * (1.0f + static_cast<float>(i % 7));  // scales vary
  const Tensor w = Tensor::from_vector<float>({K, N}, wv);
  for (int64_t bits : {8, 4}) {
    INFO(bits << "-bit scale codes");
    WeightResult r = quantize_weight_values(WeightInput{w, int4_blocks(WeightAlgorithm::Rtn), 0});
    const std::vector<float> before = r.params.scales();
    const double rtn_error = r.error;
    QParams p = r.params;
    const ScaleCodes sc = double_quantize_scales(p, r.codes, bits, 4);
    REQUIRE(sc.codes.shape() == Shape{4, 6});
    CHECK(sc.codes.dtype() == (bits == 8 ? DType::UInt8 : DType::UInt4));
    CHECK(sc.scale.shape() == Shape{4, 2});  // ceil(6 / 4) floats per row of scales
    CHECK(sc.axis == 1);
    // the scale the weight DQ uses is exactly what DequantizeLinear makes of the codes
    numerics::QdqAttrs a;
    a.axis = sc.axis;
    a.block_size = sc.block_size;
    const Tensor expanded = numerics::dequantize_linear(sc.codes, sc.scale, nullptr, a);
    CHECK(std::memcmp(expanded.raw(), p.scale.raw(), 4 * 24) == 0);
    // each scale moved by at most half its group's step, and no code is 0
    const std::vector<float> after = p.scales();
    const float* c = sc.scale.data<float>();
    for (int64_t i = 0; i < 24; ++i) {
      const float step = c[(i / 6) * 2 + (i % 6) / 4];
      CHECK(std::fabs(after[static_cast<size_t>(i)] - before[static_cast<size_t>(i)]) <= 0.5f * step * 1.0001f);
      CHECK(after[static_cast<size_t>(i)] > 0.0f);
    }
    // the weight codes were re-rounded to the new scales: the error grows, by little at 8 bits
    const double e = weight_sse(w, r.codes, p);
    CHECK(e >= rtn_error * 0.98);
    if (bits == 8) CHECK(e <= rtn_error * 1.05);
  }
}

TEST_CASE("RTN's codes and weight error are the same for any thread count and equal DequantizeLinear's error") {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  struct Case {
    Shape shape;
    TensorSettings s;
    int64_t axis;
  };
  TensorSettings u4 = int4_blocks(WeightAlgorithm::Rtn);
  u4.dtype = DType::UInt4;
  u4.symmetric = false;
  TensorSettings u8 = int8_channels(WeightAlgorithm::Rtn);
  u8.dtype = DType::UInt8;
  u8.symmetric = false;
  TensorSettings i16 = int8_channels(WeightAlgorithm::Rtn);
  i16.dtype = DType::Int16;  // no inlined reader: dtype_info's load
  const std::vector<Case> cases = {{{512, 300}, int4_blocks(WeightAlgorithm::Rtn), 0},
                                   {{1000, 96}, u4, 1},
                                   {{300, 400}, int8_channels(WeightAlgorithm::Rtn), 1},
                                   {{64, 32, 3, 3}, u8, 0},
                                   {{256, 260}, i16, 1}};
  for (const auto& c : cases) {
    INFO(shape_str(c.shape) << " " << dtype_name(c.s.dtype));
    Tensor w(DType::Float32, c.shape);
    for (float& v : w.span<float>()) v = normal(rng);
    const WeightResult one = quantize_rtn(WeightInput{w, c.s, c.axis});
    WeightInput in{w, c.s, c.axis};
    in.threads = 3;
    const WeightResult three = quantize_rtn(in);
    CHECK(three.codes.same_as(one.codes));
    CHECK(three.params.scale.same_as(one.params.scale));
    CHECK(three.error == one.error);  // bit for bit: the same summation order
    const numerics::QdqAttrs a{.axis = one.params.axis >= 0 ? one.params.axis : 1, .block_size = one.params.block_size};
    const Tensor dq = numerics::dequantize_linear(one.codes, one.params.scale, &one.params.zero_point, a);
    double direct = 0;
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double d = static_cast<double>(w.data<float>()[i]) - dq.data<float>()[i];
      direct += d * d;
    }
    CHECK(one.error == Approx(direct).epsilon(1e-9));
    CHECK(one.error > 0);
  }
}
