// inspect::summarize on graphs built inline: weight granularity (per-tensor, per-channel, per-block, and
// float weights quantized by a QuantizeLinear), activation dtypes, op keys outside the default domain,
// parameters in Constant attributes and subgraphs.
#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>

#include "inspect/inspect.h"

using namespace qtool;
using namespace qtool::inspect;

namespace {

// ONNX 1.12 predates INT4 in its enum; the number is the one in qtool's dtype table.
constexpr int32_t kInt4 = static_cast<int32_t>(DType::Int4);

struct Builder {
  onnx::ModelProto m;
  onnx::GraphProto* g;
  Builder() : g(m.mutable_graph()) {
    m.set_ir_version(9);
    auto* op = m.add_opset_import();
    op->set_version(21);
  }
  onnx::TensorProto* init(const std::string& name, int32_t dtype, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(dtype);
    int64_t n = 1;
    for (int64_t d : dims) t->add_dims(d), n *= d;
    const int64_t bytes = dtype == onnx::TensorProto::FLOAT ? 4 * n
                          : dtype == kInt4                  ? (n + 1) / 2
                                                            : n;  // the other dtypes used here are 8-bit
    t->set_raw_data(std::string(static_cast<size_t>(bytes), '\0'));
    return t;
  }
  onnx::NodeProto* node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
                        onnx::GraphProto* graph = nullptr) {
    auto* n = (graph ? graph : g)->add_node();
    n->set_op_type(op);
    for (auto& i : in) n->add_input(i);
    for (auto& o : out) n->add_output(o);
    return n;
  }
  static void attr_i(onnx::NodeProto* n, const std::string& name, int64_t v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
};

}  // namespace

TEST_CASE("weight granularity comes from the DequantizeLinear scale shape, axis and block_size") {
  Builder b;
  using T = onnx::TensorProto;
  // per-tensor int8 (scalar scale)
  b.init("w1", T::INT8, {4, 4});
  b.init("s1", T::FLOAT, {});
  b.node("DequantizeLinear", {"w1", "s1"}, {"w1.dq"});
  // per-channel int8, axis -2 on a rank-2 weight = axis 0
  b.init("w2", T::INT8, {4, 4});
  b.init("s2", T::FLOAT, {4});
  Builder::attr_i(b.node("DequantizeLinear", {"w2", "s2"}, {"w2.dq"}), "axis", -2);
  // per-block int4 along axis 1, block 32
  b.init("w3", kInt4, {8, 64});
  b.init("s3", T::FLOAT, {8, 2});
  auto* dq3 = b.node("DequantizeLinear", {"w3", "s3"}, {"w3.dq"});
  Builder::attr_i(dq3, "axis", 1);
  Builder::attr_i(dq3, "block_size", 32);
  // a float weight quantized by a QuantizeLinear to uint8 (zero point dtype), per channel, default axis 1
  b.init("w4", T::FLOAT, {3, 5});
  b.init("s4", T::FLOAT, {5});
  b.init("z4", T::UINT8, {5});
  b.node("QuantizeLinear", {"w4", "s4", "z4"}, {"w4.q"});
  b.node("DequantizeLinear", {"w4.q", "s4", "z4"}, {"w4.dq"});
  // activations: int16 via output_dtype, uint8 by default (no zero point)
  b.init("sa", T::FLOAT, {});
  Builder::attr_i(b.node("QuantizeLinear", {"x", "sa"}, {"x.q"}), "output_dtype", T::INT16);
  b.node("QuantizeLinear", {"y", "sa"}, {"y.q"});
  b.node("DequantizeLinear", {"x.q", "sa"}, {"x.dq"});
  // a uint8 weight whose scale comes from a Constant's value_float: per-tensor
  b.init("w5", T::UINT8, {2, 2});
  auto* sc = b.node("Constant", {}, {"s5"})->add_attribute();
  sc->set_name("value_float");
  sc->set_type(onnx::AttributeProto::FLOAT);
  sc->set_f(0.5f);
  b.node("DequantizeLinear", {"w5", "s5"}, {"w5.dq"});
  // an op outside the default domain
  b.node("QGemm", {"a"}, {"b"})->set_domain("com.microsoft");

  const ModelSummary s = summarize(b.m);
  CHECK(s.quantization.quantize_linear == 3);
  CHECK(s.quantization.dequantize_linear == 6);
  REQUIRE(s.quantization.weights.size() == 5);
  auto find = [&](DType dt, Granularity g) -> const WeightGroup* {
    for (const auto& w : s.quantization.weights)
      if (w.dtype == dt && w.granularity == g) return &w;
    return nullptr;
  };
  const WeightGroup* pt = find(DType::Int8, Granularity::PerTensor);
  REQUIRE(pt);
  CHECK(pt->count == 1);
  CHECK(!pt->axis);
  const WeightGroup* pc = find(DType::Int8, Granularity::PerChannel);
  REQUIRE(pc);
  CHECK(pc->axis == 0);
  const WeightGroup* pb = find(DType::Int4, Granularity::PerBlock);
  REQUIRE(pb);
  CHECK(pb->axis == 1);
  CHECK(pb->block_size == 32);
  const WeightGroup* qw = find(DType::UInt8, Granularity::PerChannel);
  REQUIRE(qw);
  CHECK(qw->axis == 1);
  const WeightGroup* u8 = find(DType::UInt8, Granularity::PerTensor);
  REQUIRE(u8);
  CHECK(u8->count == 1);
  CHECK(s.quantization.activations == std::map<DType, int64_t>{{DType::UInt8, 1}, {DType::Int16, 1}});
  CHECK(s.op_counts.at("com.microsoft.QGemm") == 1);
  CHECK(s.op_counts.at("QuantizeLinear") == 3);
  // int4 parameters are counted by element, stored two per byte
  CHECK(s.parameters.by_dtype.at(DType::Int4).count == 8 * 64);
  CHECK(s.parameters.by_dtype.at(DType::Int4).bytes == 8 * 64 / 2);
}

TEST_CASE("parameters include Constant values (tensor and list forms) in subgraphs, not other attributes") {
  Builder b;
  using T = onnx::TensorProto;
  auto* iff = b.node("If", {"cond"}, {"y"});
  auto* a = iff->add_attribute();
  a->set_name("then_branch");
  a->set_type(onnx::AttributeProto::GRAPH);
  auto* body = a->mutable_g();
  auto* c = b.node("Constant", {}, {"k"}, body);
  auto* v = c->add_attribute();
  v->set_name("value");
  v->set_type(onnx::AttributeProto::TENSOR);
  v->mutable_t()->set_data_type(T::FLOAT);
  v->mutable_t()->add_dims(6);
  v->mutable_t()->set_raw_data(std::string(24, '\0'));
  auto* c2 = b.node("Constant", {}, {"l"}, body);
  auto* lf = c2->add_attribute();
  lf->set_name("value_ints");
  lf->set_type(onnx::AttributeProto::INTS);
  for (int i = 0; i < 3; ++i) lf->add_ints(i);
  // ConstantOfShape's fill value is an attribute tensor but not a parameter
  auto* cos = b.node("ConstantOfShape", {"shape"}, {"z"}, body);
  auto* fill = cos->add_attribute();
  fill->set_name("value");
  fill->set_type(onnx::AttributeProto::TENSOR);
  fill->mutable_t()->set_data_type(T::FLOAT);
  fill->mutable_t()->add_dims(1);
  fill->mutable_t()->add_float_data(0.f);

  const ModelSummary s = summarize(b.m);
  CHECK(s.subgraph_count == 1);
  CHECK(s.op_counts == std::map<std::string, int64_t>{{"If", 1}, {"Constant", 2}, {"ConstantOfShape", 1}});
  CHECK(s.parameters.count == 6 + 3);
  CHECK(s.parameters.bytes == 24 + 24);
  CHECK(s.parameters.tensors == 2);
  CHECK(!s.quantization.quantized());
}

TEST_CASE("weight bytes follow constants through Q/DQ to the nodes that read them") {
  Builder b;
  using T = onnx::TensorProto;
  // an int4 block-quantized weight read by two MatMuls, its float scales stored as uint8 codes expanded by a
  // DequantizeLinear (double quantization) whose own scale is one float per row
  b.init("w", kInt4, {64, 8});
  b.init("codes", T::UINT8, {2, 8});
  b.init("code_scale", T::FLOAT, {1, 8});
  b.node("DequantizeLinear", {"codes", "code_scale"}, {"w.scale"});
  b.node("DequantizeLinear", {"w", "w.scale"}, {"w.dq"});
  b.node("MatMul", {"x", "w.dq"}, {"y1"});
  b.node("MatMul", {"z", "w.dq"}, {"y2"});
  // an int8 embedding quantized from float by Q -> DQ, read by a Gather
  b.init("emb", T::FLOAT, {10, 4});
  b.init("es", T::FLOAT, {});
  b.init("ez", T::INT8, {});
  b.node("QuantizeLinear", {"emb", "es", "ez"}, {"emb.q"});
  b.node("DequantizeLinear", {"emb.q", "es", "ez"}, {"emb.dq"});
  b.node("Gather", {"emb.dq", "ids"}, {"e"});
  // a float constant read directly, and one nothing reads
  b.init("gamma", T::FLOAT, {8});
  b.node("Mul", {"y1", "gamma"}, {"y3"});
  b.init("unused", T::FLOAT, {100});

  const ModelSummary s = summarize(b.m);
  // the DQ expanding the scale codes is not a quantized weight
  REQUIRE(s.quantization.weights.size() == 2);
  CHECK(s.quantization.weights[0].dtype == DType::Int8);
  CHECK(s.quantization.weights[1].dtype == DType::Int4);
  const WeightBytes& wb = s.weight_bytes;
  REQUIRE(wb.weights.size() == 2);
  const ConstantUse& i4 = wb.weights.at(DType::Int4);
  CHECK(i4.bytes == 64 * 8 / 2);
  CHECK(i4.tensors == 1);
  CHECK(i4.nodes == 2);
  CHECK(i4.ops == std::map<std::string, int64_t>{{"MatMul", 2}});
  const ConstantUse& f = wb.weights.at(DType::Float32);  // emb (through Q/DQ) and gamma
  CHECK(f.bytes == 4 * (10 * 4 + 8));
  CHECK(f.tensors == 2);
  CHECK(f.ops == std::map<std::string, int64_t>{{"Gather", 1}, {"Mul", 1}});
  // scales and zero points: the uint8 codes count as uint8, not as the float scale they expand to
  REQUIRE(wb.quant_params.size() == 3);
  CHECK(wb.quant_params.at(DType::UInt8).bytes == 16);
  CHECK(wb.quant_params.at(DType::UInt8).nodes == 1);
  CHECK(wb.quant_params.at(DType::Float32).bytes == 4 * (8 + 1));  // code_scale, es
  CHECK(wb.quant_params.at(DType::Float32).nodes == 3);            // the codes' DQ, the embedding's Q and DQ
  CHECK(wb.quant_params.at(DType::Int8).bytes == 1);
}

TEST_CASE("a dynamically quantized model counts as quantized: ConvInteger and DynamicQuantizeLinear are listed") {
  // ONNX Runtime's quantize_dynamic form of a Conv (ISNet has 119): no QuantizeLinear or DequantizeLinear at all.
  Builder b;
  using T = onnx::TensorProto;
  b.init("wq", T::UINT8, {3, 2, 3, 3});
  b.init("wz", T::UINT8, {});
  b.init("ws", T::FLOAT, {});
  b.node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"});
  b.node("ConvInteger", {"xq", "wq", "xz", "wz"}, {"acc"});
  Builder::attr_i(b.node("Cast", {"acc"}, {"accf"}), "to", T::FLOAT);
  b.node("Mul", {"xs", "ws"}, {"s"});
  b.node("Mul", {"accf", "s"}, {"y"});

  const ModelSummary s = summarize(b.m);
  CHECK(s.quantization.quantized());
  CHECK(s.quantization.quantize_linear == 0);
  CHECK(s.quantization.dequantize_linear == 0);
  CHECK(s.quantization.quantized_ops ==
        std::map<std::string, int64_t>{{"ConvInteger", 1}, {"DynamicQuantizeLinear", 1}});
  REQUIRE(s.quantization.weights.size() == 1);  // the ConvInteger weight, per tensor (scalar zero point)
  CHECK(s.quantization.weights[0].dtype == DType::UInt8);
  CHECK(s.quantization.weights[0].granularity == Granularity::PerTensor);
  CHECK(s.weight_bytes.quant_params.at(DType::UInt8).ops == std::map<std::string, int64_t>{{"ConvInteger", 1}});
}

TEST_CASE("a sequence or optional graph input or output is described by the tensors it holds") {
  Builder b;
  auto* in = b.g->add_input();
  in->set_name("parts");
  auto* elem = in->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type();
  elem->set_elem_type(onnx::TensorProto::FLOAT);
  elem->mutable_shape()->add_dim()->set_dim_param("n");
  elem->mutable_shape()->add_dim()->set_dim_value(4);
  auto* opt = b.g->add_output();
  opt->set_name("maybe");
  opt->mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
      onnx::TensorProto::INT64);
  auto* map = b.g->add_output();
  map->set_name("scores");
  map->mutable_type()->mutable_map_type()->set_key_type(onnx::TensorProto::STRING);
  const ModelSummary s = summarize(b.m);
  REQUIRE(s.inputs.size() == 1);
  CHECK(s.inputs[0].type == "sequence");
  CHECK(s.inputs[0].dtype == DType::Float32);
  REQUIRE(s.inputs[0].shape);
  REQUIRE(s.inputs[0].shape->size() == 2);
  CHECK((*s.inputs[0].shape)[0].symbol == "n");
  CHECK((*s.inputs[0].shape)[1].value == 4);
  REQUIRE(s.outputs.size() == 2);
  CHECK(s.outputs[0].type == "optional");
  CHECK(s.outputs[0].dtype == DType::Int64);
  CHECK(!s.outputs[0].shape);
  CHECK(s.outputs[1].type == "map");  // no tensor type to describe
  CHECK(!s.outputs[1].dtype);
}
