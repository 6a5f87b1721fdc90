// Drives compute kernels directly (no executor): builds a NodeInfo, looks the kernel up in the
// registry, runs it with a KernelContext, and returns the outputs. Also loads the ONNX backend
// node tests (/usr/share/libonnx-testdata) as NodeInfo + inputs + expected outputs.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "runtime/kernel.h"

namespace onnx {
class NodeProto;
}

namespace qtool::test {

struct KernelCall {
  std::string op;
  int opset = 17;
  runtime::NodeAttrs attrs;
  std::vector<Tensor> inputs;  // an empty Tensor = omitted optional input
  std::vector<bool> constant;  // inputs marked constant are given to the factory (const_inputs)
  size_t num_outputs = 1;
  int threads = 1;
  runtime::FusedActivation activation;                  // as graph preparation's fusion sets it
  bool blocked_input = false, blocked_output = false;   // Conv: as runtime/conv_layout.h sets them
  device::DeviceKind device = device::DeviceKind::Cpu;  // Cuda: the GPU row when there is one (find_kernel)
};

std::vector<Tensor> run_kernel(const KernelCall& call);
// Short form: run_kernel(op, opset, attrs, inputs)
std::vector<Tensor> run_kernel(const std::string& op, int opset, runtime::NodeAttrs attrs, std::vector<Tensor> inputs,
                               size_t num_outputs = 1, int threads = 1);

// Attribute builders.
runtime::Attribute attr_int(int64_t v);
runtime::Attribute attr_float(float v);
runtime::Attribute attr_str(std::string v);
runtime::Attribute attr_ints(std::vector<int64_t> v);
runtime::Attribute attr_floats(std::vector<float> v);
runtime::Attribute attr_strs(std::vector<std::string> v);

// Deterministic pseudo-random float tensor in [lo, hi).
Tensor random_tensor(Shape shape, uint32_t seed, float lo = -1.f, float hi = 1.f);
// Float tensor holding start, start + 1, ... in C order.
Tensor iota_tensor(Shape shape, float start = 0.f);
// Largest |a - b| over elements; +inf when shapes or dtypes differ.
double max_abs_diff(const Tensor& a, const Tensor& b);

// One ONNX backend node test: the model's single node and test_data_set_0.
struct BackendCase {
  std::string name;
  KernelCall call;
  std::vector<Tensor> expected;
};
// A model node as the kernels see it: attributes decoded, const_inputs from `consts` (by value name).
// The returned NodeInfo points into `consts`, which must outlive it.
runtime::NodeInfo node_info_from_proto(const onnx::NodeProto& n, int opset,
                                       const std::map<std::string, Tensor>& consts);

// nullopt-like: returns false when the model has more than one node.
bool load_backend_case(const std::filesystem::path& dir, BackendCase& out);
// Compares an output with the expected tensor: same dtype and shape, |a-b| <= atol + rtol*|b|
// (NaN matches NaN). Returns an empty string when equal, else a description.
std::string compare_outputs(const Tensor& got, const Tensor& want, double atol, double rtol);

}  // namespace qtool::test
