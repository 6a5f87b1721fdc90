#include "runtime/kernel.h"

#include <spdlog/spdlog.h>

#include "runtime/kernels/kernels.h"

namespace qtool::runtime {
namespace {

const char* kind_name(Attribute::Kind k) {
  switch (k) {
    case Attribute::Kind::Float: return "float";
    case Attribute::Kind::Int: return "int";
    case Attribute::Kind::String: return "string";
    case Attribute::Kind::Tensor: return "tensor";
    case Attribute::Kind::Graph: return "graph";
    case Attribute::Kind::Floats: return "floats";
    case Attribute::Kind::Ints: return "ints";
    case Attribute::Kind::Strings: return "strings";
  }
  return "?";
}

const Attribute* typed(const NodeAttrs& attrs, std::string_view name, Attribute::Kind want) {
  const Attribute* a = attrs.find(name);
  if (a && a->kind != want)
    throw BadInputError("attribute '" + std::string(name) + "' is a " + kind_name(a->kind) + ", expected " +
                        kind_name(want));
  return a;
}

}  // namespace

const Attribute* NodeAttrs::find(std::string_view name) const {
  auto it = values.find(name);
  return it == values.end() ? nullptr : &it->second;
}

int64_t NodeAttrs::get_int(std::string_view name, int64_t dflt) const {
  const Attribute* a = typed(*this, name, Attribute::Kind::Int);
  return a ? a->i : dflt;
}
float NodeAttrs::get_float(std::string_view name, float dflt) const {
  const Attribute* a = typed(*this, name, Attribute::Kind::Float);
  return a ? a->f : dflt;
}
std::string NodeAttrs::get_string(std::string_view name, std::string dflt) const {
  const Attribute* a = typed(*this, name, Attribute::Kind::String);
  return a ? a->s : dflt;
}
std::vector<int64_t> NodeAttrs::get_ints(std::string_view name, std::vector<int64_t> dflt) const {
  const Attribute* a = typed(*this, name, Attribute::Kind::Ints);
  return a ? a->ints : dflt;
}
std::vector<float> NodeAttrs::get_floats(std::string_view name, std::vector<float> dflt) const {
  const Attribute* a = typed(*this, name, Attribute::Kind::Floats);
  return a ? a->floats : dflt;
}
int64_t NodeAttrs::require_int(std::string_view name) const {
  const Attribute* a = typed(*this, name, Attribute::Kind::Int);
  if (!a) throw BadInputError("required attribute '" + std::string(name) + "' is missing");
  return a->i;
}
const qtool::Tensor& NodeAttrs::require_tensor(std::string_view name) const {
  const Attribute* a = typed(*this, name, Attribute::Kind::Tensor);
  if (!a) throw BadInputError("required attribute '" + std::string(name) + "' is missing");
  return a->t;
}
std::shared_ptr<const Graph> NodeAttrs::require_graph(std::string_view name) const {
  const Attribute* a = typed(*this, name, Attribute::Kind::Graph);
  if (!a || !a->g) throw BadInputError("required graph attribute '" + std::string(name) + "' is missing");
  return a->g;
}

const qtool::Tensor& KernelContext::input(size_t i) const {
  if (!has_input(i))
    throw BadInputError(node.label() + ": input " + std::to_string(i) +
                        (is_sequence(i) ? " is a sequence, expected a tensor" : " is required but missing"));
  return *inputs[i];
}

const TensorSequence& KernelContext::sequence(size_t i) const {
  if (!is_sequence(i))
    throw BadInputError(node.label() + ": input " + std::to_string(i) +
                        (has_input(i) ? " is a tensor, expected a sequence" : " is required but missing"));
  return *seq_inputs[i];
}

SequenceRef KernelContext::take_sequence(size_t i) {
  sequence(i);  // the checks
  SequenceRef s = seq_inputs[i];
  if (s.use_count() == 2) {  // ours and the slot's: the frame handed this node the last reference
    seq_inputs[i].reset();
    return s;
  }
  return std::make_shared<TensorSequence>(*s);
}

Value KernelContext::value(size_t i) const {
  if (is_sequence(i)) return Value(seq_inputs[i]);
  if (has_input(i)) return Value(*inputs[i]);
  return Value();
}

void KernelContext::set_output(size_t i, Value v) {
  if (v.is_sequence()) {
    if (i >= seq_outputs.size())
      throw InternalError(node.label() + ": output " + std::to_string(i) + " is a sequence, which this op's " +
                          "registry row does not allow");
    seq_outputs[i] = std::move(v.sequence);
    return;
  }
  outputs[i] = std::move(v.tensor);
}

std::vector<qtool::Tensor> SubgraphRunner::run(const Graph& body, std::span<const qtool::Tensor> inputs) {
  std::vector<Value> args(inputs.begin(), inputs.end());
  std::vector<Value> outs = run_values(body, std::move(args));
  std::vector<qtool::Tensor> tensors;
  tensors.reserve(outs.size());
  for (size_t k = 0; k < outs.size(); ++k) {
    if (outs[k].is_sequence())
      throw BadInputError("body output " + std::to_string(k) + " is a sequence, where this op takes tensors");
    tensors.push_back(std::move(outs[k].tensor));
  }
  return tensors;
}

void log_cpu_fallback(const NodeInfo& node, std::string_view why) {
  spdlog::debug("{}: {}; runs on the CPU", node.label(), why);
}

void kernels::log_gpu_node(const NodeInfo& node, std::string_view how) {
  spdlog::debug("{}: runs on the GPU ({})", node.label(), how);
}

bool is_gpu_row(const KernelDef* def) {
  const std::span<const KernelDef> gpu = registered_cuda_kernels();
  return !gpu.empty() && !std::less<>()(def, gpu.data()) && std::less<>()(def, gpu.data() + gpu.size());
}

const KernelDef* find_kernel(std::string_view domain, std::string_view op_type, int opset, device::DeviceKind device) {
  const std::string_view dom = (domain == "ai.onnx") ? std::string_view{} : domain;
  if (device == device::DeviceKind::Cuda)
    for (const KernelDef& k : registered_cuda_kernels())
      if (k.domain == dom && k.op_type == op_type && opset >= k.since_version && opset <= k.until_version) return &k;
  for (const KernelDef& k : registered_kernels())
    if (k.domain == dom && k.op_type == op_type && opset >= k.since_version && opset <= k.until_version) return &k;
  return nullptr;
}

}  // namespace qtool::runtime
