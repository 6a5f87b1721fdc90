#include "kernel_harness.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>

#include "onnx/tensor_proto.h"

namespace qtool::test {
using runtime::Attribute;

std::vector<Tensor> run_kernel(const KernelCall& call) {
  runtime::NodeInfo node;
  node.name = "under_test";
  node.op_type = call.op;
  node.opset = call.opset;
  node.attrs = call.attrs;
  node.activation = call.activation;
  node.blocked_input = call.blocked_input;
  node.blocked_output = call.blocked_output;
  for (size_t i = 0; i < call.inputs.size(); ++i) {
    const bool present = !call.inputs[i].empty();
    node.inputs.push_back(present ? "in" + std::to_string(i) : "");
    const bool is_const = present && i < call.constant.size() && call.constant[i];
    node.const_inputs.push_back(is_const ? &call.inputs[i] : nullptr);
  }
  for (size_t i = 0; i < call.num_outputs; ++i) node.outputs.push_back("out" + std::to_string(i));
  const runtime::KernelDef* def = runtime::find_kernel("", call.op, call.opset, call.device);
  if (!def) throw UnsupportedError("no kernel for " + call.op + " opset " + std::to_string(call.opset));
  auto kernel = def->make(node);
  std::vector<const Tensor*> ins;
  for (const Tensor& t : call.inputs) ins.push_back(t.empty() ? nullptr : &t);
  std::vector<Tensor> outs(call.num_outputs);
  runtime::KernelContext ctx{node, ins, outs, call.threads, nullptr};
  kernel->run(ctx);
  return outs;
}

std::vector<Tensor> run_kernel(const std::string& op, int opset, runtime::NodeAttrs attrs, std::vector<Tensor> inputs,
                               size_t num_outputs, int threads) {
  KernelCall c;
  c.op = op;
  c.opset = opset;
  c.attrs = std::move(attrs);
  c.inputs = std::move(inputs);
  c.num_outputs = num_outputs;
  c.threads = threads;
  return run_kernel(c);
}

Attribute attr_int(int64_t v) {
  Attribute a;
  a.kind = Attribute::Kind::Int;
  a.i = v;
  return a;
}
Attribute attr_float(float v) {
  Attribute a;
  a.kind = Attribute::Kind::Float;
  a.f = v;
  return a;
}
Attribute attr_str(std::string v) {
  Attribute a;
  a.kind = Attribute::Kind::String;
  a.s = std::move(v);
  return a;
}
Attribute attr_ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Attribute::Kind::Ints;
  a.ints = std::move(v);
  return a;
}
Attribute attr_floats(std::vector<float> v) {
  Attribute a;
  a.kind = Attribute::Kind::Floats;
  a.floats = std::move(v);
  return a;
}
Attribute attr_strs(std::vector<std::string> v) {
  Attribute a;
  a.kind = Attribute::Kind::Strings;
  a.strings = std::move(v);
  return a;
}

Tensor iota_tensor(Shape shape, float start) {
  Tensor t(DType::Float32, std::move(shape));
  std::iota(t.span<float>().begin(), t.span<float>().end(), start);
  return t;
}

Tensor random_tensor(Shape shape, uint32_t seed, float lo, float hi) {
  // xorshift64*: cheap enough for the benchmark's large activations, deterministic everywhere.
  uint64_t state = 0x9E3779B97F4A7C15ull ^ (uint64_t{seed} * 0xBF58476D1CE4E5B9ull);
  Tensor t(DType::Float32, std::move(shape));
  for (float& v : t.span<float>()) {
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    const uint64_t r = state * 0x2545F4914F6CDD1Dull;
    v = lo + (hi - lo) * static_cast<float>(r >> 40) * (1.f / 16777216.f);
  }
  return t;
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.dtype() != DType::Float32)
    return std::numeric_limits<double>::infinity();
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i) m = std::max(m, std::fabs(double(a.data<float>()[i]) - b.data<float>()[i]));
  return m;
}

namespace {
template <class T>
bool parse_file(const std::filesystem::path& p, T& msg) {
  std::ifstream f(p, std::ios::binary);
  return f && msg.ParseFromIstream(&f);
}

Attribute decode_attribute(const onnx::AttributeProto& a) {
  Attribute r;
  switch (a.type()) {
    case onnx::AttributeProto::FLOAT:
      r = attr_float(a.f());
      break;
    case onnx::AttributeProto::INT:
      r = attr_int(a.i());
      break;
    case onnx::AttributeProto::STRING:
      r = attr_str(a.s());
      break;
    case onnx::AttributeProto::TENSOR:
      r.kind = Attribute::Kind::Tensor;
      r.t = onnxio::tensor_from_proto(a.t(), a.name());
      break;
    case onnx::AttributeProto::FLOATS:
      r = attr_floats({a.floats().begin(), a.floats().end()});
      break;
    case onnx::AttributeProto::INTS:
      r = attr_ints({a.ints().begin(), a.ints().end()});
      break;
    case onnx::AttributeProto::STRINGS:
      r = attr_strs({a.strings().begin(), a.strings().end()});
      break;
    default:
      throw UnsupportedError("attribute '" + a.name() + "' has an unsupported type");
  }
  return r;
}
}  // namespace

runtime::NodeInfo node_info_from_proto(const onnx::NodeProto& n, int opset,
                                       const std::map<std::string, Tensor>& consts) {
  runtime::NodeInfo node;
  node.name = n.name();
  node.op_type = n.op_type();
  node.domain = n.domain();
  node.opset = opset;
  for (const auto& a : n.attribute()) node.attrs.values[a.name()] = decode_attribute(a);
  for (const std::string& in : n.input()) {
    node.inputs.push_back(in);
    auto it = consts.find(in);
    node.const_inputs.push_back(it == consts.end() ? nullptr : &it->second);
  }
  node.outputs.assign(n.output().begin(), n.output().end());
  return node;
}

bool load_backend_case(const std::filesystem::path& dir, BackendCase& out) {
  onnx::ModelProto model;
  if (!parse_file(dir / "model.onnx", model)) throw BadInputError("cannot parse " + (dir / "model.onnx").string());
  if (model.graph().node_size() != 1) return false;
  const onnx::NodeProto& n = model.graph().node(0);
  out.name = dir.filename().string();
  out.call = {};
  out.call.op = n.op_type();
  out.expected.clear();
  for (const auto& imp : model.opset_import())
    if (imp.domain().empty() || imp.domain() == "ai.onnx") out.call.opset = static_cast<int>(imp.version());
  for (const auto& a : n.attribute()) out.call.attrs.values[a.name()] = decode_attribute(a);
  const auto data = dir / "test_data_set_0";
  // Graph inputs are the node's non-empty inputs, in order.
  int gi = 0;
  for (const std::string& name : n.input()) {
    if (name.empty()) {
      out.call.inputs.emplace_back();
      continue;
    }
    onnx::TensorProto tp;
    if (!parse_file(data / ("input_" + std::to_string(gi++) + ".pb"), tp))
      throw BadInputError(out.name + ": missing input " + name);
    out.call.inputs.push_back(onnxio::tensor_from_proto(tp, name));
  }
  out.call.num_outputs = static_cast<size_t>(n.output_size());
  out.expected.clear();
  int go = 0;  // graph outputs are the node's non-empty outputs, in order
  for (int i = 0; i < n.output_size(); ++i) {
    if (n.output(i).empty()) {
      out.expected.emplace_back();
      continue;
    }
    onnx::TensorProto tp;
    if (!parse_file(data / ("output_" + std::to_string(go++) + ".pb"), tp))
      throw BadInputError(out.name + ": missing output " + std::to_string(i));
    out.expected.push_back(onnxio::tensor_from_proto(tp, n.output(i)));
  }
  return true;
}

namespace {
template <class T>
std::string compare_typed(const Tensor& got, const Tensor& want, double atol, double rtol) {
  const T* g = got.data<T>();
  const T* w = want.data<T>();
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double a = static_cast<double>(g[i]), b = static_cast<double>(w[i]);
    if (std::isnan(a) && std::isnan(b)) continue;
    if (std::isinf(b) && a == b) continue;
    if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b))) {
      std::ostringstream s;
      s << "element " << i << ": got " << a << ", want " << b;
      return s.str();
    }
  }
  return "";
}
}  // namespace

std::string compare_outputs(const Tensor& got, const Tensor& want, double atol, double rtol) {
  if (got.empty()) return "output not produced";
  if (got.dtype() != want.dtype())
    return "dtype " + std::string(dtype_name(got.dtype())) + " vs " + std::string(dtype_name(want.dtype()));
  if (got.shape() != want.shape()) return "shape " + shape_str(got.shape()) + " vs " + shape_str(want.shape());
  switch (got.dtype()) {
    case DType::Float32:
      return compare_typed<float>(got, want, atol, rtol);
    case DType::Float64:
      return compare_typed<double>(got, want, atol, rtol);
    case DType::Int64:
      return compare_typed<int64_t>(got, want, 0, 0);
    case DType::Int32:
      return compare_typed<int32_t>(got, want, 0, 0);
    case DType::Int8:
      return compare_typed<int8_t>(got, want, 0, 0);
    case DType::UInt8:
      return compare_typed<uint8_t>(got, want, 0, 0);
    default:
      return got.same_as(want) ? "" : "bytes differ";
  }
}

}  // namespace qtool::test
