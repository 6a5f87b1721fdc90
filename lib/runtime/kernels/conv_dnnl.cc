// oneDNN Conv (conv_dnnl.h). Built with oneDNN only when CMake found it (QTOOL_DNNL, the compile
// definition QTOOL_HAVE_DNNL is set on this file alone); otherwise make_dnnl_conv returns nullptr and the
// own kernels run everything.
#include "runtime/kernels/conv_dnnl.h"

#ifdef QTOOL_HAVE_DNNL
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "runtime/kernels/blas.h"
#include "runtime/kernels/blocked_layout.h"
#include "runtime/kernels/compute_common.h"
#endif

namespace qtool::runtime::kernels::compute {

#ifdef QTOOL_HAVE_DNNL
namespace {

// Sets the calling thread's OpenMP thread count for one oneDNN call and restores it after: oneDNN's OpenMP
// runtime takes omp_get_max_threads() when it builds a primitive and when it runs one.
class OmpThreads {
 public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreads() { omp_set_num_threads(saved_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
};

using dnnl::memory;
using Tag = memory::format_tag;

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

class DnnlConvImpl final : public DnnlConv {
 public:
  DnnlConvImpl(const Tensor& W, int64_t group, bool has_bias, const FusedActivation& act)
      : W_(W), group_(group), has_bias_(has_bias), act_(act) {}

  bool run(const ConvGeom& g, int64_t N, int64_t C, const float* x, const float* b, float* y, int threads,
           ConvLayouts layouts) override {
    if (g.in.size() != 2 || (b != nullptr) != has_bias_) return false;
    if ((layouts.src_blocked && C % kChannelBlock != 0) || (layouts.dst_blocked && W_.dim(0) % kChannelBlock != 0))
      return false;
    const Key key =
        std::make_tuple(N, C, g.in[0], g.in[1], g.strides[0], g.strides[1], g.dilations[0], g.dilations[1], g.pads[0],
                        g.pads[1], g.pads[2], g.pads[3], threads, layouts.src_blocked, layouts.dst_blocked);
    OmpThreads scope(threads);
    std::shared_ptr<const Plan> plan;  // held for this call: another thread may evict it meanwhile
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = plans_.find(key);
      if (it == plans_.end()) {
        // Inputs of changing shapes (calibration images of several sizes) would otherwise keep one reordered
        // copy of W per shape: keep the most recent kMaxPlans.
        if (order_.size() == kMaxPlans) {
          plans_.erase(order_.front());
          order_.pop_front();
        }
        it = plans_.emplace(key, build(g, N, C, layouts)).first;
        order_.push_back(key);
      }
      plan = it->second;
    }
    if (!plan) return false;
    dnnl::stream stream(cpu_engine());
    memory src(plan->user_src, cpu_engine(), const_cast<float*>(x));
    memory dst(plan->user_dst, cpu_engine(), y);
    // Blocked copies of X and Y when the primitive wants them, in this thread's scratch (a fresh buffer per
    // call costs page faults on every run of the large early layers).
    const size_t src_floats = plan->src_reorder ? plan->pd.src_desc().get_size() / sizeof(float) + 16 : 0;
    const size_t dst_floats = plan->dst_reorder ? plan->pd.dst_desc().get_size() / sizeof(float) + 16 : 0;
    const size_t pad_floats = (plan->pd.scratchpad_desc().get_size() + sizeof(float) - 1) / sizeof(float) + 16;
    float* scratch = scratch_floats(src_floats + dst_floats + pad_floats);
    auto aligned = [](float* p) {  // 64-byte boundary, within the 16 spare floats
      return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63});
    };
    memory conv_src = src, conv_dst = dst;
    // The reorders are plain copies: a second thread only for copies worth a wake-up (threading.h).
    const int64_t src_n = N * C * g.in[0] * g.in[1], dst_n = N * W_.dim(0) * g.out[0] * g.out[1];
    if (plan->src_reorder) {
      conv_src = memory(plan->pd.src_desc(), cpu_engine(), aligned(scratch));
      OmpThreads copy_scope(threads_for(src_n, threads));
      plan->src_reorder->execute(stream, src, conv_src);
    }
    if (plan->dst_reorder) conv_dst = memory(plan->pd.dst_desc(), cpu_engine(), aligned(scratch + src_floats));
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, conv_src}, {DNNL_ARG_WEIGHTS, plan->weights}, {DNNL_ARG_DST, conv_dst}};
    if (b) args.emplace(DNNL_ARG_BIAS, memory(plan->bias, cpu_engine(), const_cast<float*>(b)));
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 memory(plan->pd.scratchpad_desc(), cpu_engine(), aligned(scratch + src_floats + dst_floats)));
    plan->conv.execute(stream, args);
    if (plan->dst_reorder) {
      OmpThreads copy_scope(threads_for(dst_n, threads));
      plan->dst_reorder->execute(stream, conv_dst, dst);
    }
    stream.wait();
    if (act_.channels) {  // the activation too when it is not a post-op, then the per-channel clamp and affine
      FusedActivation rest = act_;
      if (plan->act_in_primitive) rest.kind = FusedActivation::Kind::None;
      const int64_t M = W_.dim(0), plane = g.out[0] * g.out[1];
      if (layouts.dst_blocked) {  // per block of 8 interleaved channels
        const int64_t blocks = M / kChannelBlock;
        parallel_for(N * blocks, threads_for(N * M * plane, threads), [&](int64_t nb) {
          apply_conv_epilogue_blocked(rest, y + nb * kChannelBlock * plane, plane, nb % blocks * kChannelBlock);
        });
      } else {
        parallel_for(N * M, threads_for(N * M * plane, threads),
                     [&](int64_t nm) { apply_conv_epilogue(rest, y + nm * plane, plane, nm % M); });
      }
    } else if (!plan->act_in_primitive) {
      constexpr int64_t kChunk = 1 << 14;
      const int64_t n = dst_n, chunks = (n + kChunk - 1) / kChunk;
      parallel_for(chunks, threads_for(n, threads),
                   [&](int64_t c) { apply_activation(act_, y + c * kChunk, std::min(kChunk, n - c * kChunk)); });
    }
    return true;
  }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int, bool, bool>;
  struct Plan {
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::convolution_forward conv;
    memory::desc user_src, user_dst, bias;
    std::optional<dnnl::reorder> src_reorder, dst_reorder;
    memory weights;  // W in pd.weights_desc(), reordered once
    bool act_in_primitive = false;
  };

  std::shared_ptr<const Plan> build(const ConvGeom& g, int64_t N, int64_t C, ConvLayouts layouts) {
    const int64_t M = W_.dim(0), KH = W_.dim(2), KW = W_.dim(3);
    const memory::dims src_dims{N, C, g.in[0], g.in[1]}, dst_dims{N, M, g.out[0], g.out[1]};
    const memory::dims w_dims =
        group_ == 1 ? memory::dims{M, C, KH, KW} : memory::dims{group_, M / group_, C / group_, KH, KW};
    // nChw8c is blocked_layout.h's layout [N, C/8, H, W, 8].
    const memory::desc user_src(src_dims, memory::data_type::f32, layouts.src_blocked ? Tag::nChw8c : Tag::nchw);
    const memory::desc user_dst(dst_dims, memory::data_type::f32, layouts.dst_blocked ? Tag::nChw8c : Tag::nchw);
    const memory::desc user_w(w_dims, memory::data_type::f32, group_ == 1 ? Tag::oihw : Tag::goihw);
    const memory::desc bias({M}, memory::data_type::f32, Tag::x);
    const memory::desc any_src(src_dims, memory::data_type::f32, Tag::any);
    const memory::desc any_dst(dst_dims, memory::data_type::f32, Tag::any);
    const memory::desc any_w(w_dims, memory::data_type::f32, Tag::any);
    dnnl::post_ops ops;
    bool act_in_primitive = true;
    switch (act_.kind) {
      case FusedActivation::Kind::None:
        break;
      case FusedActivation::Kind::Relu:  // max(x, 0) as clip to [0, inf): +0 for negatives, as ours
        ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, std::numeric_limits<float>::infinity());
        break;
      case FusedActivation::Kind::Clip:
        ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, act_.a, act_.b);
        break;
      default:
        act_in_primitive = false;
    }
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    // The primitive's scratchpad comes from the calling thread's scratch, not oneDNN's global one: sessions run
    // concurrently on several threads (the accuracy guard runs one per thread), and Debian's build shares the
    // global scratchpad between them (a crash in the guard's parallel evaluation before this).
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    try {
      const dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                              any_src, any_w, has_bias_ ? bias : memory::desc(), any_dst,
                                              {g.strides[0], g.strides[1]}, {g.dilations[0] - 1, g.dilations[1] - 1},
                                              {g.pads[0], g.pads[1]}, {g.pads[2], g.pads[3]});
      dnnl::convolution_forward::primitive_desc pd(d, attr, cpu_engine());
      auto plan = std::make_shared<Plan>(Plan{pd,
                                              dnnl::convolution_forward(pd),
                                              user_src,
                                              user_dst,
                                              bias,
                                              {},
                                              {},
                                              memory(pd.weights_desc(), cpu_engine()),
                                              act_in_primitive});
      if (pd.src_desc() != user_src)
        plan->src_reorder.emplace(dnnl::reorder::primitive_desc(cpu_engine(), user_src, cpu_engine(), pd.src_desc()));
      if (pd.dst_desc() != user_dst)
        plan->dst_reorder.emplace(dnnl::reorder::primitive_desc(cpu_engine(), pd.dst_desc(), cpu_engine(), user_dst));
      dnnl::stream stream(cpu_engine());
      memory w(user_w, cpu_engine(), const_cast<float*>(W_.data<float>()));
      dnnl::reorder(w, plan->weights).execute(stream, w, plan->weights);
      stream.wait();
      return plan;
    } catch (const dnnl::error&) {
      return nullptr;  // no oneDNN primitive for this shape: the own kernel runs it
    }
  }

  Tensor W_;  // shares the graph's initializer
  int64_t group_;
  bool has_bias_;
  FusedActivation act_;
  static constexpr size_t kMaxPlans = 8;
  std::mutex mutex_;
  std::map<Key, std::shared_ptr<const Plan>> plans_;  // nullptr: oneDNN declined this shape
  std::deque<Key> order_;                             // keys of plans_, oldest first
};

}  // namespace

bool dnnl_conv_available() { return true; }

std::unique_ptr<DnnlConv> make_dnnl_conv(const Tensor& W, int64_t group, bool has_bias, const FusedActivation& act) {
  if (W.dtype() != DType::Float32 || W.rank() != 4) return nullptr;
  return std::make_unique<DnnlConvImpl>(W, group, has_bias, act);
}
#else
bool dnnl_conv_available() { return false; }
std::unique_ptr<DnnlConv> make_dnnl_conv(const Tensor&, int64_t, bool, const FusedActivation&) { return nullptr; }
#endif

}  // namespace qtool::runtime::kernels::compute
