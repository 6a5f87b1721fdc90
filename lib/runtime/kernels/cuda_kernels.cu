// The interpreter's GPU kernels (rows in registry.cc, CUDA builds only): elementwise ops on the per-thread loops of
// elementwise_device.h, MatMul and Gemm on cuBLAS. Each kernel copies its inputs to the device, runs, and copies the
// output back (explicit transfers, no tensor stays on the device between nodes), so the rest of the interpreter sees
// host tensors as always. What a kernel has no GPU path for (a dtype other than float32, a MatMul whose B is not
// 2-D, more broadcast dims than kMaxRank, a fused Silu) runs on the node's CPU kernel, logged once at -v.
//
// Numerics: elementwise ops other than Sigmoid are the CPU's IEEE operations (--fmad=false); cuBLAS sums in another
// order than OpenBLAS, so Gemm/MatMul agree within float tolerance. Built and emulated here, never run on a GPU in
// this repository's CI (docs/cuda.md).
#include <cublas_v2.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "device/cuda_buffer.h"
#include "device/device.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/elementwise_device.h"
#include "runtime/kernels/kernels.h"

namespace qtool::runtime::kernels {
namespace {

namespace ew = device_elementwise;
using qtool::device::cuda_check;
using qtool::device::DeviceBuffer;
using qtool::device::ThreadCoord;

constexpr int kThreads = 256;
constexpr int64_t kMaxGrid = 4096;

__device__ ThreadCoord coord() {
  return {static_cast<int64_t>(blockIdx.x), static_cast<int64_t>(threadIdx.x), static_cast<int64_t>(gridDim.x),
          static_cast<int64_t>(blockDim.x)};
}

__global__ void unary_kernel(ew::UnaryOp u, const float* x, float* y, int64_t n) { ew::unary_loop(coord(), u, x, y, n); }

__global__ void binary_kernel(ew::Binary op, ew::Broadcast2 bc, const float* a, const float* b, float* y, int64_t n) {
  ew::binary_loop(coord(), op, bc, a, b, y, n);
}

unsigned grid_for(int64_t n) {
  const int64_t g = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(g < 1 ? 1 : (g > kMaxGrid ? kMaxGrid : g));
}

// y = u(y) in place on the device.
void apply_on_device(const ew::UnaryOp& u, float* y, int64_t n) {
  if (n == 0) return;
  unary_kernel<<<grid_for(n), kThreads>>>(u, y, y, n);
  cuda_check(cudaGetLastError(), "unary kernel");
}

// A GPU kernel's CPU twin for what the GPU path does not cover; says so once at -v.
class CpuFallback {
 public:
  explicit CpuFallback(const NodeInfo& node)
      : kernel_(find_kernel(node.domain, node.op_type, node.opset, device::DeviceKind::Cpu)->make(node)) {}
  void run(KernelContext& ctx, const char* why) {
    if (!logged_.exchange(true)) log_cpu_fallback(ctx.node, why);
    kernel_->run(ctx);
  }

 private:
  std::unique_ptr<Kernel> kernel_;
  std::atomic<bool> logged_{false};
};

bool all_float(const KernelContext& ctx) {
  for (size_t i = 0; i < ctx.num_inputs(); ++i)
    if (ctx.has_input(i) && ctx.inputs[i]->dtype() != DType::Float32) return false;
  return true;
}

// The fused activation as a device op; false for one without a device formula (Silu).
bool device_activation(const FusedActivation& a, ew::UnaryOp& u) {
  switch (a.kind) {
    case FusedActivation::Kind::None: u = {ew::Unary::Relu}; return true;  // unused: n = 0 below
    case FusedActivation::Kind::Relu: u = {ew::Unary::Relu}; return true;
    case FusedActivation::Kind::Clip: u = {ew::Unary::Clip, a.a, a.b}; return true;
    case FusedActivation::Kind::HardSigmoid: u = {ew::Unary::HardSigmoid, a.a, a.b}; return true;
    case FusedActivation::Kind::HardSwish: u = {ew::Unary::HardSwish}; return true;
    case FusedActivation::Kind::Silu: return false;
  }
  return false;
}

// ---- elementwise ---------------------------------------------------------------------------------------------

class CudaUnaryKernel final : public Kernel {
 public:
  explicit CudaUnaryKernel(const NodeInfo& n) : cpu_(n), opset_(n.opset) {
    const std::string& t = n.op_type;
    if (t == "Relu") u_ = {ew::Unary::Relu};
    else if (t == "LeakyRelu") u_ = {ew::Unary::LeakyRelu, n.attrs.get_float("alpha", 0.01f)};
    else if (t == "HardSigmoid")
      u_ = {ew::Unary::HardSigmoid, n.attrs.get_float("alpha", 0.2f), n.attrs.get_float("beta", 0.5f)};
    else if (t == "HardSwish") u_ = {ew::Unary::HardSwish};
    else if (t == "Sigmoid") u_ = {ew::Unary::Sigmoid};
    else if (t == "Clip") u_ = {ew::Unary::Clip, n.attrs.get_float("min", -INFINITY), n.attrs.get_float("max", INFINITY)};
    else throw InternalError("CudaUnaryKernel registered for " + t);
  }

  void run(KernelContext& ctx) override {
    if (!all_float(ctx)) return cpu_.run(ctx, "not float32");
    ew::UnaryOp u = u_;
    if (u.op == ew::Unary::Clip && opset_ >= 11) {  // bounds are inputs from opset 11: scalars of x's dtype
      for (size_t i : {size_t{1}, size_t{2}})
        if (ctx.has_input(i) && ctx.input(i).numel() != 1) return cpu_.run(ctx, "Clip bounds are not scalars");
      u.a = ctx.has_input(1) ? ctx.input(1).data<float>()[0] : std::numeric_limits<float>::lowest();
      u.b = ctx.has_input(2) ? ctx.input(2).data<float>()[0] : std::numeric_limits<float>::max();
    }
    device::bind_selected_device();
    const Tensor& x = ctx.input(0);
    DeviceBuffer<float> d(std::span<const float>(x.data<float>(), static_cast<size_t>(x.numel())));
    apply_on_device(u, d.get(), x.numel());
    Tensor y(DType::Float32, x.shape());
    d.download(y.data<float>());
    ctx.outputs[0] = std::move(y);
  }

 private:
  CpuFallback cpu_;
  int opset_;
  ew::UnaryOp u_{ew::Unary::Relu};
};

class CudaBinaryKernel final : public Kernel {
 public:
  explicit CudaBinaryKernel(const NodeInfo& n) : cpu_(n) {
    const std::string& t = n.op_type;
    if (t == "Add") op_ = ew::Binary::Add;
    else if (t == "Sub") op_ = ew::Binary::Sub;
    else if (t == "Mul") op_ = ew::Binary::Mul;
    else if (t == "Div") op_ = ew::Binary::Div;
    else if (t == "Max") op_ = ew::Binary::Max;
    else if (t == "Min") op_ = ew::Binary::Min;
    else throw InternalError("CudaBinaryKernel registered for " + t);
  }

  void run(KernelContext& ctx) override {
    if (ctx.num_inputs() != 2 || !ctx.has_input(0) || !ctx.has_input(1)) return cpu_.run(ctx, "not two inputs");
    if (!all_float(ctx)) return cpu_.run(ctx, "not float32");
    const Tensor &a = ctx.input(0), &b = ctx.input(1);
    const BroadcastPlan plan = plan_broadcast({&a.shape(), &b.shape()}, ctx.node);
    ew::Broadcast2 bc;
    if (!ew::to_broadcast2(plan, bc)) return cpu_.run(ctx, "too many broadcast dimensions");
    device::bind_selected_device();
    const DeviceBuffer<float> da(std::span<const float>(a.data<float>(), static_cast<size_t>(a.numel())));
    const DeviceBuffer<float> db(std::span<const float>(b.data<float>(), static_cast<size_t>(b.numel())));
    DeviceBuffer<float> dy(static_cast<size_t>(plan.numel));
    if (plan.numel > 0) {
      binary_kernel<<<grid_for(plan.numel), kThreads>>>(op_, bc, da.get(), db.get(), dy.get(), plan.numel);
      cuda_check(cudaGetLastError(), "binary kernel");
    }
    Tensor y(DType::Float32, plan.out_shape);
    dy.download(y.data<float>());
    ctx.outputs[0] = std::move(y);
  }

 private:
  CpuFallback cpu_;
  ew::Binary op_ = ew::Binary::Add;
};

// ---- cuBLAS --------------------------------------------------------------------------------------------------

// One cuBLAS handle per host thread, on the selected device; default math (no TF32: float32 products).
cublasHandle_t blas() {
  struct Handle {
    cublasHandle_t h = nullptr;
    Handle() {
      if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw InternalError("cuBLAS: cublasCreate failed");
      cublasSetMathMode(h, CUBLAS_DEFAULT_MATH);
    }
    ~Handle() { cublasDestroy(h); }
  };
  thread_local Handle handle;
  return handle.h;
}

void blas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw InternalError(std::string("cuBLAS: ") + what + " failed (status " +
                                                      std::to_string(static_cast<int>(s)) + ")");
}

// Row-major Y[M,N] = alpha * op(A) * op(B) + beta * Y on the device: cuBLAS is column-major, so it computes
// Y^T = op(B)^T op(A)^T with the row-major buffers read as their transposes.
void sgemm_rowmajor(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                    const float* B, int64_t ldb, float beta, float* Y) {
  blas_check(cublasSgemm(blas(), tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, static_cast<int>(N),
                         static_cast<int>(M), static_cast<int>(K), &alpha, B, static_cast<int>(ldb), A,
                         static_cast<int>(lda), &beta, Y, static_cast<int>(N)),
             "cublasSgemm");
}

// MatMul with a 2-D B (weights: the common case): A [..., M, K] is one [rows, K] matrix.
class CudaMatMulKernel final : public Kernel {
 public:
  explicit CudaMatMulKernel(const NodeInfo& n) : cpu_(n), gpu_act_(device_activation(n.activation, act_)) {}

  void run(KernelContext& ctx) override {
    if (!gpu_act_) return cpu_.run(ctx, "fused activation without a GPU formula");
    if (!all_float(ctx)) return cpu_.run(ctx, "not float32");
    const Tensor &A = ctx.input(0), &B = ctx.input(1);
    if (A.rank() < 2 || B.rank() != 2 || A.dim(A.rank() - 1) != B.dim(0)) return cpu_.run(ctx, "B is not 2-D");
    const int64_t K = B.dim(0), N = B.dim(1), rows = A.numel() / std::max<int64_t>(K, 1);
    if (K == 0 || rows == 0 || N == 0 || rows > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
      return cpu_.run(ctx, "empty or over 2^31 rows");
    device::bind_selected_device();
    const DeviceBuffer<float> da(std::span<const float>(A.data<float>(), static_cast<size_t>(A.numel())));
    const DeviceBuffer<float> db(std::span<const float>(B.data<float>(), static_cast<size_t>(B.numel())));
    DeviceBuffer<float> dy(static_cast<size_t>(rows * N));
    sgemm_rowmajor(false, false, rows, N, K, 1.f, da.get(), K, db.get(), N, 0.f, dy.get());
    if (ctx.node.activation.kind != FusedActivation::Kind::None) apply_on_device(act_, dy.get(), rows * N);
    Shape ys(A.shape().begin(), A.shape().end() - 1);
    ys.push_back(N);
    Tensor Y(DType::Float32, ys);
    dy.download(Y.data<float>());
    ctx.outputs[0] = std::move(Y);
  }

 private:
  CpuFallback cpu_;
  ew::UnaryOp act_{ew::Unary::Relu};
  bool gpu_act_;
};

// Gemm: C is broadcast and scaled by beta on the host exactly as the CPU kernel does, then accumulated by cuBLAS.
class CudaGemmKernel final : public Kernel {
 public:
  explicit CudaGemmKernel(const NodeInfo& n)
      : cpu_(n),
        alpha_(n.attrs.get_float("alpha", 1.f)),
        beta_(n.attrs.get_float("beta", 1.f)),
        ta_(n.attrs.get_int("transA", 0) != 0),
        tb_(n.attrs.get_int("transB", 0) != 0),
        gpu_act_(device_activation(n.activation, act_)) {}

  void run(KernelContext& ctx) override {
    if (!gpu_act_) return cpu_.run(ctx, "fused activation without a GPU formula");
    if (!all_float(ctx)) return cpu_.run(ctx, "not float32");
    const Tensor &A = ctx.input(0), &B = ctx.input(1);
    if (A.rank() != 2 || B.rank() != 2) return cpu_.run(ctx, "A or B is not 2-D");  // the CPU kernel reports it
    const int64_t M = ta_ ? A.dim(1) : A.dim(0), K = ta_ ? A.dim(0) : A.dim(1);
    const int64_t Kb = tb_ ? B.dim(1) : B.dim(0), N = tb_ ? B.dim(0) : B.dim(1);
    if (K != Kb || M == 0 || N == 0 || K == 0) return cpu_.run(ctx, "shapes the GPU path does not take");
    Tensor Y(DType::Float32, {M, N});
    float* y = Y.data<float>();
    const bool has_c = ctx.has_input(2) && beta_ != 0.f;
    if (has_c) {
      if (!compute::gemm_fill_c(ctx.input(2), beta_, M, N, y)) return cpu_.run(ctx, "C does not broadcast");
    }
    device::bind_selected_device();
    const DeviceBuffer<float> da(std::span<const float>(A.data<float>(), static_cast<size_t>(A.numel())));
    const DeviceBuffer<float> db(std::span<const float>(B.data<float>(), static_cast<size_t>(B.numel())));
    DeviceBuffer<float> dy(static_cast<size_t>(M * N));
    if (has_c) dy.upload(y);
    sgemm_rowmajor(ta_, tb_, M, N, K, alpha_, da.get(), A.dim(1), db.get(), B.dim(1), has_c ? 1.f : 0.f, dy.get());
    if (ctx.node.activation.kind != FusedActivation::Kind::None) apply_on_device(act_, dy.get(), M * N);
    dy.download(y);
    ctx.outputs[0] = std::move(Y);
  }

 private:
  CpuFallback cpu_;
  float alpha_, beta_;
  bool ta_, tb_;
  ew::UnaryOp act_{ew::Unary::Relu};
  bool gpu_act_;
};

}  // namespace

std::unique_ptr<Kernel> make_cuda_unary(const NodeInfo& n) { return std::make_unique<CudaUnaryKernel>(n); }
std::unique_ptr<Kernel> make_cuda_binary(const NodeInfo& n) { return std::make_unique<CudaBinaryKernel>(n); }
std::unique_ptr<Kernel> make_cuda_matmul(const NodeInfo& n) { return std::make_unique<CudaMatMulKernel>(n); }
std::unique_ptr<Kernel> make_cuda_gemm(const NodeInfo& n) { return std::make_unique<CudaGemmKernel>(n); }

}  // namespace qtool::runtime::kernels
