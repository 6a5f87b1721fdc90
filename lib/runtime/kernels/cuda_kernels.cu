// The interpreter's GPU kernels (rows in registry.cc, CUDA builds only): elementwise ops on the per-thread loops of
// elementwise_device.h, MatMul and Gemm on cuBLAS, Conv on cuDNN (conv_cudnn_plan.h decides how, on the host). Each
// kernel copies its inputs to the device, runs, and copies the output back (explicit transfers, no tensor stays on
// the device between nodes; a Conv's constant weights and bias are uploaded once), so the rest of the interpreter
// sees host tensors as always. What a kernel has no GPU path for (a dtype other than float32, a MatMul whose B is
// not 2-D, more broadcast dims than kMaxRank, a 3-D Conv) runs on the node's CPU kernel. At -v each node says once
// where it runs: "runs on the GPU (...)" on its first GPU run, "...; runs on the CPU" on its first fallback.
//
// Numerics: elementwise ops other than Sigmoid and Silu are the CPU's IEEE operations (--fmad=false); cuBLAS and
// cuDNN sum in another order than the CPU, so Gemm/MatMul/Conv agree within float tolerance. Built and emulated
// here, never run on a GPU in this repository's CI (docs/cuda.md).
#include <cublas_v2.h>
#include <cudnn.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "device/cuda_buffer.h"
#include "device/device.h"
#include "runtime/kernels/compute_common.h"
#include "runtime/kernels/conv_cudnn_plan.h"
#include "runtime/kernels/conv_device.h"
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

// Says once at -v that a node runs on the GPU, and how.
class GpuRunLog {
 public:
  void once(const NodeInfo& node, std::string_view how) {
    if (!logged_.exchange(true)) log_gpu_node(node, how);
  }

 private:
  std::atomic<bool> logged_{false};
};

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
    gpu_.once(ctx.node, "elementwise kernel");
  }

 private:
  CpuFallback cpu_;
  GpuRunLog gpu_;
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
    gpu_.once(ctx.node, "elementwise kernel");
  }

 private:
  CpuFallback cpu_;
  GpuRunLog gpu_;
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
  explicit CudaMatMulKernel(const NodeInfo& n) : cpu_(n), has_act_(ew::fused_unary(n.activation, act_)) {}

  void run(KernelContext& ctx) override {
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
    if (has_act_) apply_on_device(act_, dy.get(), rows * N);
    gpu_.once(ctx.node, "cuBLAS");
    Shape ys(A.shape().begin(), A.shape().end() - 1);
    ys.push_back(N);
    Tensor Y(DType::Float32, ys);
    dy.download(Y.data<float>());
    ctx.outputs[0] = std::move(Y);
  }

 private:
  CpuFallback cpu_;
  GpuRunLog gpu_;
  ew::UnaryOp act_{ew::Unary::Relu};
  bool has_act_;
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
        has_act_(ew::fused_unary(n.activation, act_)) {}

  void run(KernelContext& ctx) override {
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
    if (has_act_) apply_on_device(act_, dy.get(), M * N);
    gpu_.once(ctx.node, "cuBLAS");
    dy.download(y);
    ctx.outputs[0] = std::move(Y);
  }

 private:
  CpuFallback cpu_;
  float alpha_, beta_;
  bool ta_, tb_;
  GpuRunLog gpu_;
  ew::UnaryOp act_{ew::Unary::Relu};
  bool has_act_;
};


// ---- cuDNN ---------------------------------------------------------------------------------------------------

namespace cc = cudnn_conv;
namespace dc = device_conv;

static_assert(static_cast<int>(cc::Algo::ImplicitGemm) == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM &&
              static_cast<int>(cc::Algo::ImplicitPrecompGemm) == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM &&
              static_cast<int>(cc::Algo::Gemm) == CUDNN_CONVOLUTION_FWD_ALGO_GEMM &&
              static_cast<int>(cc::Algo::Direct) == CUDNN_CONVOLUTION_FWD_ALGO_DIRECT &&
              static_cast<int>(cc::Algo::Fft) == CUDNN_CONVOLUTION_FWD_ALGO_FFT &&
              static_cast<int>(cc::Algo::FftTiling) == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING &&
              static_cast<int>(cc::Algo::Winograd) == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD &&
              static_cast<int>(cc::Algo::WinogradNonfused) == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
              "cudnn_conv::Algo follows cudnnConvolutionFwdAlgo_t");

__global__ void pad_planes_kernel(dc::PadPlanes p, const float* x, float* y) { dc::pad_planes_loop(coord(), p, x, y); }

__global__ void bias_activation_kernel(dc::BiasActivation e, float* y, int64_t n) {
  dc::bias_activation_loop(coord(), e, y, n);
}

void dnn_check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) throw InternalError(std::string("cuDNN: ") + what + ": " + cudnnGetErrorString(s));
}

// One cuDNN handle per host thread, on the selected device, on the default stream like every other kernel here.
cudnnHandle_t dnn() {
  struct Handle {
    cudnnHandle_t h = nullptr;
    Handle() { dnn_check(cudnnCreate(&h), "cudnnCreate"); }
    ~Handle() { cudnnDestroy(h); }
  };
  thread_local Handle handle;
  return handle.h;
}

// The convolution workspace: one device buffer per host thread, grown to the largest a Conv asked for.
void* dnn_workspace(size_t bytes) {
  thread_local std::unique_ptr<DeviceBuffer<unsigned char>> ws;
  if (bytes == 0) return nullptr;
  if (!ws || ws->size() < bytes) {
    ws.reset();  // free before allocating the larger one
    ws = std::make_unique<DeviceBuffer<unsigned char>>(bytes);
  }
  return ws->get();
}

// A cuDNN call of a Conv's setup that failed: the node runs on the CPU for these shapes, with this reason.
struct SetupRejected {
  std::string why;
};
void setup_check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS)
    throw SetupRejected{std::string("cuDNN rejects it: ") + what + ": " + cudnnGetErrorString(s)};
}

// A plan's cuDNN descriptors and algorithm, built once per node and input shapes.
struct ConvSetup {
  cc::Decision decision;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace = 0;
  std::string how;  // for -v

  ConvSetup() = default;
  ConvSetup(const ConvSetup&) = delete;
  ConvSetup& operator=(const ConvSetup&) = delete;
  ~ConvSetup() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }

  // Descriptors from the plan, math restricted to float32 FMA (no TF32), then the algorithm (cc::choose_algo).
  void build(cudnnHandle_t h, const NodeInfo& node) {
    const cc::Plan& p = *decision.plan;
    setup_check(cudnnCreateTensorDescriptor(&x), "x descriptor");
    setup_check(cudnnCreateTensorDescriptor(&y), "y descriptor");
    setup_check(cudnnCreateFilterDescriptor(&w), "w descriptor");
    setup_check(cudnnCreateConvolutionDescriptor(&conv), "convolution descriptor");
    setup_check(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, p.x[0], p.x[1], p.x[2], p.x[3]),
                "x descriptor");
    setup_check(cudnnSetFilter4dDescriptor(w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, p.w[0], p.w[1], p.w[2], p.w[3]),
                "w descriptor");
    setup_check(cudnnSetConvolution2dDescriptor(conv, p.pad[0], p.pad[1], p.stride[0], p.stride[1], p.dilation[0],
                                                p.dilation[1], CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                "convolution descriptor");
    setup_check(cudnnSetConvolutionGroupCount(conv, p.groups), "group count");
    setup_check(cudnnSetConvolutionMathType(conv, CUDNN_FMA_MATH), "FMA math");
    int dims[4] = {};
    setup_check(cudnnGetConvolution2dForwardOutputDim(conv, x, w, &dims[0], &dims[1], &dims[2], &dims[3]),
                "output dims");
    if (dims[0] != p.y[0] || dims[1] != p.y[1] || dims[2] != p.y[2] || dims[3] != p.y[3])
      throw InternalError(node.label() + ": cuDNN's output dims differ from the plan's");
    setup_check(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, p.y[0], p.y[1], p.y[2], p.y[3]),
                "y descriptor");
    int count = 0;
    setup_check(cudnnGetConvolutionForwardAlgorithmMaxCount(h, &count), "algorithm count");
    std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(static_cast<size_t>(std::max(count, 1)));
    int returned = 0;
    setup_check(cudnnGetConvolutionForwardAlgorithm_v7(h, x, w, conv, y, count, &returned, perf.data()),
                "algorithm heuristics");
    std::vector<cc::AlgoCandidate> ranked;
    for (int i = 0; i < returned; ++i) {
      const cudnnConvolutionFwdAlgoPerf_t& r = perf[static_cast<size_t>(i)];
      if (r.algo < 0 || r.algo >= CUDNN_CONVOLUTION_FWD_ALGO_COUNT) continue;
      ranked.push_back({static_cast<cc::Algo>(r.algo), r.status == CUDNN_STATUS_SUCCESS,
                        r.determinism == CUDNN_DETERMINISTIC, r.mathType == CUDNN_FMA_MATH, r.memory});
    }
    const cc::AlgoCandidate pick = cc::choose_algo(ranked);
    algo = static_cast<cudnnConvolutionFwdAlgo_t>(pick.algo);
    setup_check(cudnnGetConvolutionForwardWorkspaceSize(h, x, w, conv, y, algo, &workspace), "workspace size");
    how = "cuDNN " + std::string(cc::algo_name(pick.algo)) + ", " + std::to_string(workspace) + " B workspace" +
          (p.pad_step ? ", explicit pad step" : "");
  }
};

// Conv on cuDNN: [explicit pad step,] cudnnConvolutionForward, then bias and the fused activation in one pass.
// Setups are cached per (X, W, B) shapes, behind a mutex (a session's runs do not overlap; the mutex keeps a graph
// shared by two sessions safe).
class CudaConvKernel final : public Kernel {
 public:
  explicit CudaConvKernel(const NodeInfo& n)
      : cpu_(n),
        has_act_(ew::fused_unary(n.activation, act_)),
        const_w_(n.const_inputs.size() > 1 && n.const_inputs[1]),
        const_b_(n.const_inputs.size() > 2 && n.const_inputs[2]) {}

  void run(KernelContext& ctx) override {
    if (!all_float(ctx)) return cpu_.run(ctx, "not float32");
    const Tensor &X = ctx.input(0), &W = ctx.input(1);
    const Tensor* B = ctx.has_input(2) ? &ctx.input(2) : nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    device::bind_selected_device();
    const ConvSetup& s = setup_for(ctx.node, X, W, B);
    if (!s.decision.plan) return cpu_.run(ctx, s.decision.cpu_reason.c_str());
    const cc::Plan& p = *s.decision.plan;
    const cudnnHandle_t h = dnn();

    const DeviceBuffer<float> dx(std::span<const float>(X.data<float>(), static_cast<size_t>(X.numel())));
    std::optional<DeviceBuffer<float>> padded;
    const float* x = dx.get();
    if (p.pad_step) {
      const dc::PadPlanes pp{int64_t{p.x[0]} * p.x[1], p.in[0], p.in[1], p.x[2], p.x[3], p.pad_begin[0],
                             p.pad_begin[1]};
      padded.emplace(static_cast<size_t>(pp.out_numel()));
      pad_planes_kernel<<<grid_for(pp.out_numel()), kThreads>>>(pp, dx.get(), padded->get());
      cuda_check(cudaGetLastError(), "pad kernel");
      x = padded->get();
    }
    const float* w = on_device(W, const_w_, w_dev_, w_tmp_);
    const float* b = B ? on_device(*B, const_b_, b_dev_, b_tmp_) : nullptr;
    const int64_t n = int64_t{p.y[0]} * p.y[1] * p.y[2] * p.y[3];
    DeviceBuffer<float> dy(static_cast<size_t>(n));
    const float one = 1.f, zero = 0.f;
    dnn_check(cudnnConvolutionForward(h, &one, s.x, x, s.w, w, s.conv, s.algo, dnn_workspace(s.workspace),
                                      s.workspace, &zero, s.y, dy.get()),
              "cudnnConvolutionForward");
    if (b || has_act_) {
      const dc::BiasActivation e{b, p.y[1], int64_t{p.y[2]} * p.y[3], has_act_, act_};
      bias_activation_kernel<<<grid_for(n), kThreads>>>(e, dy.get(), n);
      cuda_check(cudaGetLastError(), "bias/activation kernel");
    }
    Tensor Y(DType::Float32, p.y_shape);
    dy.download(Y.data<float>());
    w_tmp_.reset();
    b_tmp_.reset();
    ctx.outputs[0] = std::move(Y);
    gpu_.once(ctx.node, s.how);
  }

 private:
  const ConvSetup& setup_for(const NodeInfo& node, const Tensor& X, const Tensor& W, const Tensor* B) {
    std::vector<int64_t> key(X.shape().begin(), X.shape().end());
    key.push_back(-1);
    key.insert(key.end(), W.shape().begin(), W.shape().end());
    if (B) {
      key.push_back(-2);
      key.insert(key.end(), B->shape().begin(), B->shape().end());
    }
    std::unique_ptr<ConvSetup>& slot = setups_[key];
    if (slot) return *slot;
    auto s = std::make_unique<ConvSetup>();
    s->decision = cc::plan_conv(node, X.shape(), W.shape(), B ? &B->shape() : nullptr);
    if (s->decision.plan) {
      try {
        s->build(dnn(), node);
      } catch (const SetupRejected& r) {
        s->decision = {std::nullopt, r.why};
      }
    }
    slot = std::move(s);
    return *slot;
  }

  // A constant input is uploaded once and kept; any other for this run only (tmp, released after the run).
  static const float* on_device(const Tensor& t, bool constant, std::unique_ptr<DeviceBuffer<float>>& kept,
                                std::unique_ptr<DeviceBuffer<float>>& tmp) {
    std::unique_ptr<DeviceBuffer<float>>& slot = constant ? kept : tmp;
    if (!constant || !slot)
      slot = std::make_unique<DeviceBuffer<float>>(
          std::span<const float>(t.data<float>(), static_cast<size_t>(t.numel())));
    return slot->get();
  }

  CpuFallback cpu_;
  GpuRunLog gpu_;
  ew::UnaryOp act_{ew::Unary::Relu};
  bool has_act_;
  bool const_w_, const_b_;
  std::mutex mutex_;
  std::map<std::vector<int64_t>, std::unique_ptr<ConvSetup>> setups_;
  std::unique_ptr<DeviceBuffer<float>> w_dev_, b_dev_, w_tmp_, b_tmp_;
};

}  // namespace

std::unique_ptr<Kernel> make_cuda_unary(const NodeInfo& n) { return std::make_unique<CudaUnaryKernel>(n); }
std::unique_ptr<Kernel> make_cuda_binary(const NodeInfo& n) { return std::make_unique<CudaBinaryKernel>(n); }
std::unique_ptr<Kernel> make_cuda_matmul(const NodeInfo& n) { return std::make_unique<CudaMatMulKernel>(n); }
std::unique_ptr<Kernel> make_cuda_gemm(const NodeInfo& n) { return std::make_unique<CudaGemmKernel>(n); }
std::unique_ptr<Kernel> make_cuda_conv(const NodeInfo& n) { return std::make_unique<CudaConvKernel>(n); }

}  // namespace qtool::runtime::kernels
