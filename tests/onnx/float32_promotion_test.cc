// onnx/float32_promotion.h: a model computing in float16 / bfloat16 / float64 is rewritten to compute in float32
// behind Casts at its inputs and outputs; its interface, and its values up to one 16-bit (or float32) rounding, stay.
#include "onnx/float32_promotion.h"

#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/float_formats.h"
#include "runtime/model_builder.h"
#include "runtime/session.h"

#pragma GCC diagnostic ignored "-Wrestrict"

using namespace qtool;
using qtool::test::ModelBuilder;

namespace {

Tensor half(Shape shape, const std::vector<float>& v) {
  Tensor t(DType::Float16, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.data<Float16>()[i].bits = float_to_float16(v[i]);
  return t;
}

// y = Relu(x * w + c) + Cast<float16>(k): x, w, y float16; c a float16 Constant node; k a float32 initializer.
ModelBuilder half_model(DType io = DType::Float16) {
  ModelBuilder b(17);
  b.input("x", io, {2, 3});
  b.initializer("w", half({3}, {0.5f, -2.0f, 1.25f}));
  b.initializer("k", Tensor::from_vector<float>({3}, {0.1f, 0.2f, 0.3f}));
  auto& c = b.node("Constant", {}, {"c"}, "c");
  auto* a = c.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnxio::tensor_to_proto(half({3}, {1.0f, -1.0f, 0.5f}), "c", *a->mutable_t());
  ModelBuilder::attr(b.node("Cast", {"k"}, {"k16"}, "k16"), "to", int64_t{static_cast<int>(io)});
  b.node("Mul", {"x", "w"}, {"xw"}, "mul");
  b.node("Add", {"xw", "c"}, {"xwc"}, "add");
  b.node("Relu", {"xwc"}, {"r"}, "relu");
  b.node("Add", {"r", "k16"}, {"y"}, "out");
  b.output("y", io);
  return b;
}

const onnx::NodeProto& node_named(const onnx::ModelProto& m, const std::string& name) {
  for (const auto& n : m.graph().node())
    if (n.name() == name) return n;
  FAIL("no node " << name);
  return m.graph().node(0);
}

}  // namespace

TEST_CASE("float16 promotion: the graph computes in float32 behind casts, the interface is unchanged") {
  onnx::ModelProto m = half_model().model;
  REQUIRE(onnxio::needs_float32_promotion(m));
  const onnxio::Float32Promotion p = onnxio::promote_to_float32(m);
  CHECK(p.inputs == 1);
  CHECK(p.outputs == 1);
  CHECK(p.tensors == 2);                        // w and the Constant's value
  CHECK(p.typed_nodes == 1);                    // the Cast to float16
  CHECK_FALSE(onnxio::needs_float32_promotion(m));  // float32 inside; the interface is still float16
  CHECK(m.graph().input(0).type().tensor_type().elem_type() == onnx::TensorProto::FLOAT16);
  CHECK(m.graph().output(0).type().tensor_type().elem_type() == onnx::TensorProto::FLOAT16);

  // x -> Cast -> x_float32 feeds the Mul; the last node casts y_float32 back to y.
  const auto& first = m.graph().node(0);
  CHECK(first.op_type() == "Cast");
  CHECK(first.input(0) == "x");
  CHECK(first.output(0) == "x_float32");
  CHECK(node_named(m, "mul").input(0) == "x_float32");
  const auto& last = m.graph().node(m.graph().node_size() - 1);
  CHECK(last.op_type() == "Cast");
  CHECK(last.input(0) == "y_float32");
  CHECK(last.output(0) == "y");
  CHECK(last.attribute(0).i() == onnx::TensorProto::FLOAT16);
  CHECK(node_named(m, "out").output(0) == "y_float32");
  CHECK(node_named(m, "k16").attribute(0).i() == onnx::TensorProto::FLOAT);
  // The weights are float32 now, value for value.
  const Tensor w = onnxio::tensor_from_proto(m.graph().initializer(0));
  REQUIRE(w.dtype() == DType::Float32);
  CHECK(w.data<float>()[1] == -2.0f);

  // Promoting twice changes nothing more.
  const std::string once = m.SerializeAsString();
  onnxio::promote_to_float32(m);
  CHECK(m.SerializeAsString() == once);
}

TEST_CASE("float16 promotion: the interpreter runs a float16 model and returns float16 outputs") {
  for (DType io : {DType::Float16, DType::BFloat16}) {
    CAPTURE(dtype_name(io));
    const onnx::ModelProto m = half_model(io).model;
    const runtime::Session s(m);
    Tensor x(io, {2, 3});
    const std::vector<float> xs = {1, 2, 3, -4, 0.5f, 8};
    const auto& info = dtype_info(io);
    for (size_t i = 0; i < xs.size(); ++i) info.store(x.raw(), static_cast<int64_t>(i), xs[i], true);
    const Tensor y = s.run({{"x", x}}).at("y");
    REQUIRE(y.dtype() == io);
    const float w[3] = {0.5f, -2.0f, 1.25f}, c[3] = {1.0f, -1.0f, 0.5f}, k[3] = {0.1f, 0.2f, 0.3f};
    for (int i = 0; i < 6; ++i) {
      const float x16 = info.load(x.raw(), i);
      const float expect = std::max(0.0f, x16 * w[i % 3] + c[i % 3]) + k[i % 3];
      // float32 inside: one rounding to the 16-bit output (k passes a 16-bit Cast in the original, float32 here).
      CHECK(info.load(y.raw(), i) == Approx(expect).epsilon(io == DType::Float16 ? 1e-3 : 8e-3).margin(1e-3));
    }
  }
}

TEST_CASE("float16 promotion: a float32 model is left alone: old opsets are refused by name") {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {2});
  b.node("Relu", {"x"}, {"y"}, "r");
  b.output("y");
  onnx::ModelProto m = b.model;
  CHECK_FALSE(onnxio::needs_float32_promotion(m));
  CHECK_FALSE(onnxio::promote_to_float32(m).any());

  onnx::ModelProto old = half_model().model;
  old.mutable_opset_import(0)->set_version(5);
  CHECK_THROWS_AS(onnxio::promote_to_float32(old), UnsupportedError);
}

TEST_CASE("float16 promotion: an external 16-bit weight stays unread behind a Cast, once") {
  onnx::ModelProto m = half_model().model;
  onnx::TensorProto& w = *m.mutable_graph()->mutable_initializer(0);  // "w", float16
  REQUIRE(w.name() == "w");
  w.clear_raw_data();
  w.set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = w.add_external_data();
  loc->set_key("location");
  loc->set_value("w.bin");
  const onnxio::Float32Promotion p = onnxio::promote_to_float32(m);
  CHECK(p.tensors == 2);
  const onnx::TensorProto& kept = m.graph().initializer(0);
  CHECK(kept.name() == "w_float16");
  CHECK(kept.data_type() == onnx::TensorProto::FLOAT16);
  CHECK(kept.data_location() == onnx::TensorProto::EXTERNAL);
  const auto& cast = node_named(m, "w_to_float32");
  CHECK(cast.input(0) == "w_float16");
  CHECK(cast.output(0) == "w");
  CHECK_FALSE(onnxio::needs_float32_promotion(m));
  const std::string once = m.SerializeAsString();
  CHECK_FALSE(onnxio::promote_to_float32(m).any());
  CHECK(m.SerializeAsString() == once);
}

TEST_CASE("float64 promotion: values round to float32, finite ones beyond its range stay finite: io stays double") {
  // y = Max(x * w, fill): x, y float64; w and the mask-like fill -1e300 float64 initializers.
  ModelBuilder b(13);
  b.input("x", DType::Float64, {3});
  b.initializer("w", Tensor::from_vector<double>({3}, {0.1, -1e40, 3.0}));
  b.initializer("fill", Tensor::from_vector<double>({1}, {-1e300}));
  b.node("Mul", {"x", "w"}, {"xw"}, "mul");
  b.node("Max", {"xw", "fill"}, {"y"}, "max");
  b.output("y", DType::Float64);
  onnx::ModelProto m = b.model;
  REQUIRE(onnxio::needs_float32_promotion(m));
  const onnxio::Float32Promotion p = onnxio::promote_to_float32(m);
  CHECK(p.tensors == 2);
  CHECK(p.inputs == 1);
  CHECK(p.outputs == 1);
  CHECK_FALSE(onnxio::needs_float32_promotion(m));
  const Tensor w = onnxio::tensor_from_proto(m.graph().initializer(0));
  REQUIRE(w.dtype() == DType::Float32);
  CHECK(w.data<float>()[0] == 0.1f);                                 // nearest float32
  CHECK(w.data<float>()[1] == -std::numeric_limits<float>::max());  // beyond the range: finite, not -inf
  CHECK(onnxio::tensor_from_proto(m.graph().initializer(1)).data<float>()[0] == -std::numeric_limits<float>::max());
  const auto& last = m.graph().node(m.graph().node_size() - 1);
  CHECK(last.name() == "y_to_double");
  CHECK(last.attribute(0).i() == onnx::TensorProto::DOUBLE);

  // The interpreter takes and returns float64; inside, float32.
  const runtime::Session s(b.model);
  const Tensor y = s.run({{"x", Tensor::from_vector<double>({3}, {2.0, 1.0, -1.0})}}).at("y");
  REQUIRE(y.dtype() == DType::Float64);
  CHECK(y.data<double>()[0] == static_cast<double>(2.0f * 0.1f));
  CHECK(y.data<double>()[1] == -static_cast<double>(std::numeric_limits<float>::max()));  // Max with the fill
  CHECK(y.data<double>()[2] == -3.0);
}
