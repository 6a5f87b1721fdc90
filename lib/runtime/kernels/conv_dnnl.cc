// oneDNN Conv (conv_dnnl.h). Built with oneDNN only when CMake found it (QTOOL_DNNL, the compile
// definition QTOOL_HAVE_DNNL is set on this file alone); otherwise make_dnnl_conv returns nullptr and the
// own kernels run everything.
#include "runtime/kernels/conv_dnnl.h"

#ifdef QTOOL_HAVE_DNNL
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <stdexcept>
#include <string>
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

// p rounded up to a 64-byte boundary (callers ask for 16 spare floats).
float* aligned64(float* p) { return reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(p) + 63) & ~uintptr_t{63}); }

// Floats that hold a buffer of `desc` from a 64-byte boundary found by aligned64.
size_t aligned_floats(const memory::desc& desc) { return (desc.get_size() + sizeof(float) - 1) / sizeof(float) + 16; }

int64_t round_up8(int64_t c) { return (c + kChannelBlock - 1) / kChannelBlock * kChannelBlock; }

// The calling thread's buffer for layout copies, apart from scratch_floats (which the parts running on this thread
// take for their scratchpads while the copies are in use).
float* copy_scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// Rows [r0, r0 + rows) of one nChw8c image of C channels and H x W pixels as an NHWC image of `rows` rows at out.
// (Rows of an NCHW image are copied by oneDNN reorders, Part::src_copy.)
void rows_to_nhwc(const float* x, int64_t C, int64_t H, int64_t W, int64_t r0, int64_t rows, float* out) {
  for (int64_t cb = 0; cb < C / kChannelBlock; ++cb)
    for (int64_t h = 0; h < rows; ++h) {
      const float* s = x + (cb * H + r0 + h) * W * kChannelBlock;
      float* d = out + h * W * C + cb * kChannelBlock;
      for (int64_t w = 0; w < W; ++w) std::memcpy(d + w * C, s + w * kChannelBlock, kChannelBlock * sizeof(float));
    }
}

// The NHWC image of `rows` rows at x (C channels, W columns) into rows [r0, r0 + rows) of an nChw8c image of H rows
// at out.
void nhwc_to_rows(const float* x, int64_t C, int64_t H, int64_t W, int64_t r0, int64_t rows, float* out) {
  for (int64_t cb = 0; cb < C / kChannelBlock; ++cb)
    for (int64_t h = 0; h < rows; ++h) {
      const float* s = x + h * W * C + cb * kChannelBlock;
      float* d = out + (cb * H + r0 + h) * W * kChannelBlock;
      for (int64_t w = 0; w < W; ++w) std::memcpy(d + w * kChannelBlock, s + w * C, kChannelBlock * sizeof(float));
    }
}

// The calling thread's buffer for a row part's own copies, apart from copy_scratch (which may hold the whole
// images of the Conv that the part belongs to) and scratch_floats.
float* rows_scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// A part's least work (multiply-adds of one image): about 50 us on one thread, so the part's own dispatch (a few us)
// stays small beside it. At most kMaxParts parts. Parts of a Conv without groups each re-read the whole input, and
// 2^21 was the best of 2^20, 2^21 and 2^22 for them (mobilenetv2, 2 threads, 2026-11-25); a part of a grouped Conv
// reads only its own groups' channels, so it holds kGroupedPartWork (about 25 us, a few dispatches): mobilenetv2's
// depthwise Convs from 14x14 down, 25-60 us each, ran as one part at two threads.
constexpr int64_t kPartWork = int64_t{1} << 21;
constexpr int64_t kGroupedPartWork = kPartWork / 2;
constexpr int64_t kMaxParts = 8;

// How many parts a Conv of `work` multiply-adds per image is cut into, at most `most`: one at one thread; at more, a
// multiple of the thread count (parts of one size keep the threads equally busy), each of at least `least`.
int64_t part_count(int64_t work, int64_t most, int threads, int64_t least = kPartWork) {
  if (threads <= 1) return 1;
  const int64_t P = std::clamp<int64_t>(work / least, 1, std::min(kMaxParts, most));
  return P > 1 ? std::min(most, (P + threads - 1) / threads * threads) : P;
}

// How activations are stored: plain, or one of blocked_layout.h's blocked layouts.
enum class Layout { NCHW, nChw8c, NHWC };

Layout layout_of(const memory::desc& d) {
  const auto f32 = memory::data_type::f32;
  if (d == memory::desc(d.dims(), f32, Tag::nChw8c)) return Layout::nChw8c;
  if (d == memory::desc(d.dims(), f32, Tag::nhwc)) return Layout::NHWC;
  return Layout::NCHW;
}

// The image of one part's view: input rows and columns, output rows and columns. A Conv's own geometry, or for the
// pixel cut of a pointwise Conv (build_rows) a column of H x W one-pixel rows, the same memory in every layout.
struct RowGeom {
  int64_t H = 0, W = 0, OH = 0, OW = 0;
};

class DnnlConvImpl final : public DnnlConv {
 public:
  DnnlConvImpl(const Tensor& W, int64_t group, bool has_bias, const FusedActivation& act)
      : W_(W), group_(group), has_bias_(has_bias), act_(act) {}

  bool run(const ConvGeom& g, int64_t N, int64_t C, const float* x, const float* b, float* y, int threads,
           ConvLayouts layouts) override {
    if (g.in.size() != 2 || (b != nullptr) != has_bias_) return false;
    if ((layouts.src_blocked && channel_block(C) == 0) || (layouts.dst_blocked && channel_block(W_.dim(0)) == 0))
      return false;
    const Key key =
        std::make_tuple(N, C, g.in[0], g.in[1], g.strides[0], g.strides[1], g.dilations[0], g.dilations[1], g.pads[0],
                        g.pads[1], g.pads[2], g.pads[3], threads, layouts.src_blocked, layouts.dst_blocked);
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
        it = plans_.emplace(key, build(g, N, C, threads, layouts)).first;
        order_.push_back(key);
      }
      plan = it->second;
    }
    if (!plan) return false;
    if (!plan->parts.empty()) {
      run_parts(*plan, g, N, C, x, b, y, threads);
      if (!plan->dst_reorder) return true;  // each part ran the epilogue on its own outputs
    } else {
      run_whole(*plan, g, N, C, x, b, y, plan->whole_threads);
    }
    epilogue(*plan, g, N, y, threads, layouts);
    return true;
  }

 private:
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                         int64_t, int64_t, int, bool, bool>;
  // A slice of the output channels (whole groups of a grouped Conv) with its own one-thread primitive.
  struct Part {
    int64_t m0 = 0;                    // its first output channel (of the bias)
    int64_t src_off = 0, dst_off = 0;  // floats from an image's start to the part's first input / output value
    int64_t in_row = 0, in_rows = 0, out_row = 0, out_rows = 0;  // row parts: its input and output rows
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::convolution_forward conv;
    memory weights;  // W's rows of this part in pd.weights_desc()
    // Row parts with NCHW activations: oneDNN reorders between the NCHW slab of the part's rows (a strided view of
    // the image) and its NHWC copy, in and out (its jit transposes beat the scalar loops that copied NCHW rows
    // before: calibration, whose observed tensors are all NCHW, ran mobilenetv2 11 % slower with them).
    std::optional<dnnl::reorder> src_copy, dst_copy;
    memory::desc src_slab, dst_slab;
  };
  struct Plan {
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::convolution_forward conv;
    memory::desc user_src, user_dst, bias;
    memory::desc src8, dst8;  // parts: the whole input and output as nChw8c (NHWC for row parts)
    size_t src_image = 0, dst_image = 0;  // parts: floats of one image in that layout, padding included
    std::optional<dnnl::reorder> src_reorder, dst_reorder;
    memory weights;  // W in pd.weights_desc(), reordered once
    bool act_in_primitive = false;
    int whole_threads = 1;    // OpenMP threads of the whole Conv
    // When not empty, the Conv runs as these parts on nChw8c (or NHWC) images, and pd, conv and weights are unused;
    // src_reorder / dst_reorder then copy the activations into and out of that layout.
    std::vector<Part> parts;
    // Row parts: each part copies its own rows of the activations (in_rows, out_rows) into and out of NHWC from the
    // activations' layouts src / dst, no whole-image reorders on the calling thread; where a side is NHWC
    // (blocked_layout.h on AVX-512) the part reads its input rows or writes its output rows in place: a run of whole
    // rows of NHWC is contiguous.
    bool rows = false;
    Layout src = Layout::NCHW, dst = Layout::NCHW;
    RowGeom geom;  // what run_parts sees as rows: the Conv's own, or the pixel cut's
    // Row parts of a pointwise Conv on nChw8c (build_parts): each part copies its rows of every channel block into a
    // dense nChw8c image of its rows and its output rows back.
    bool blocked_rows = false;
  };

  // The parts, one chunk per (image, part) on the kernels' own work sharing (work_sharing.h): each reads its input
  // channels and writes its output channels of an nChw8c image in place. Plain NCHW activations are copied into
  // nChw8c first and out of it after, so that a Conv gives the same values in either layout.
  void run_parts(const Plan& plan, const ConvGeom& g, int64_t N, int64_t C, const float* x, const float* b, float* y,
                 int threads) {
    const int64_t M = W_.dim(0), P = static_cast<int64_t>(plan.parts.size());
    const auto src_image = static_cast<int64_t>(plan.src_image), dst_image = static_cast<int64_t>(plan.dst_image);
    dnnl::stream stream(cpu_engine());
    const float* x8 = x;
    float* y8 = y;
    if (plan.src_reorder || plan.dst_reorder) {
      const size_t src_floats = plan.src_reorder ? static_cast<size_t>(N * src_image) + 16 : 0;
      float* copies = copy_scratch(src_floats + (plan.dst_reorder ? static_cast<size_t>(N * dst_image) + 16 : 0));
      if (plan.src_reorder) {
        x8 = aligned64(copies);
        memory src(plan.user_src, cpu_engine(), const_cast<float*>(x)), src8(plan.src8, cpu_engine(),
                                                                             const_cast<float*>(x8));
        OmpThreads copy_scope(threads_for(N * C * g.in[0] * g.in[1], threads));
        plan.src_reorder->execute(stream, src, src8);
        stream.wait();
      }
      if (plan.dst_reorder) y8 = aligned64(copies + src_floats);
    }
    std::atomic<bool> failed{false};
    const int64_t H = plan.geom.H, Wd = plan.geom.W, OH = plan.geom.OH, OW = plan.geom.OW;
    parallel_for(N * P, threads, [&](int64_t np) {
      const Part& part = plan.parts[static_cast<size_t>(np % P)];
      const int64_t n = np / P;
      try {
        OmpThreads one(1);
        dnnl::stream part_stream(cpu_engine());
        float* scratch = scratch_floats(aligned_floats(part.pd.scratchpad_desc()));
        const float* src = x8 + n * src_image + part.src_off;
        float* dst = y8 + n * dst_image + part.dst_off;
        const int64_t in_floats = C * part.in_rows * Wd + 16;
        if (plan.rows) {  // the part's rows as NHWC: in place where the activations are NHWC, else this thread's copies
          float* rows = plan.src == Layout::NHWC && plan.dst == Layout::NHWC
                            ? nullptr
                            : rows_scratch(static_cast<size_t>(in_floats + M * part.out_rows * OW + 16));
          if (plan.src == Layout::NHWC) {
            src = x + n * C * H * Wd + part.in_row * Wd * C;
          } else if (part.src_copy) {
            memory slab(part.src_slab, cpu_engine(), const_cast<float*>(x) + n * C * H * Wd + part.in_row * Wd);
            memory copy(part.pd.src_desc(), cpu_engine(), aligned64(rows));
            part.src_copy->execute(part_stream, slab, copy);
            src = aligned64(rows);
          } else {  // nChw8c
            rows_to_nhwc(x + n * C * H * Wd, C, H, Wd, part.in_row, part.in_rows, aligned64(rows));
            src = aligned64(rows);
          }
          dst = plan.dst == Layout::NHWC ? y + n * M * OH * OW + part.out_row * OW * M : aligned64(rows + in_floats);
        } else if (plan.blocked_rows) {  // this thread's nChw8c copies of the part's rows
          const int64_t in_run = part.in_rows * Wd * kChannelBlock, in_n = round_up8(C) / kChannelBlock * in_run + 16;
          float* rows = rows_scratch(static_cast<size_t>(in_n + round_up8(M) * part.out_rows * OW + 16));
          float* r = aligned64(rows);
          for (int64_t cb = 0; cb < round_up8(C) / kChannelBlock; ++cb)
            std::memcpy(r + cb * in_run, x8 + n * src_image + (cb * H + part.in_row) * Wd * kChannelBlock,
                        sizeof(float) * in_run);
          src = r;
          dst = aligned64(rows + in_n);
        }
        std::unordered_map<int, memory> args{
            {DNNL_ARG_SRC, memory(part.pd.src_desc(), cpu_engine(), const_cast<float*>(src))},
            {DNNL_ARG_WEIGHTS, part.weights},
            {DNNL_ARG_DST, memory(part.pd.dst_desc(), cpu_engine(), dst)},
            {DNNL_ARG_SCRATCHPAD, memory(part.pd.scratchpad_desc(), cpu_engine(), aligned64(scratch))}};
        if (b) args.emplace(DNNL_ARG_BIAS, memory(part.pd.bias_desc(), cpu_engine(), const_cast<float*>(b + part.m0)));
        part.conv.execute(part_stream, args);
        part_stream.wait();
        if (plan.rows && part.dst_copy) {
          memory copy(part.pd.dst_desc(), cpu_engine(), dst);
          memory slab(part.dst_slab, cpu_engine(), y + n * M * OH * OW + part.out_row * OW);
          part.dst_copy->execute(part_stream, copy, slab);
          part_stream.wait();
        } else if (plan.rows && plan.dst == Layout::nChw8c) {
          nhwc_to_rows(dst, M, OH, OW, part.out_row, part.out_rows, y + n * M * OH * OW);
        }
        if (plan.blocked_rows) {
          const int64_t out_run = part.out_rows * OW * kChannelBlock;
          for (int64_t ob = 0; ob < round_up8(M) / kChannelBlock; ++ob)
            std::memcpy(y8 + n * dst_image + (ob * OH + part.out_row) * OW * kChannelBlock, dst + ob * out_run,
                        sizeof(float) * out_run);
        }
        // The epilogue of the part's outputs while they are in this thread's cache, where they are in place (no
        // reorder after the parts; the caller's epilogue() runs otherwise).
        if (!plan.dst_reorder) {
          const bool by_rows = plan.rows || plan.blocked_rows;
          const int64_t m1 = by_rows ? M : part.m0 + part.pd.dst_desc().dims()[1];
          part_epilogue(plan, y + n * dst_image, plan.rows ? plan.dst : Layout::nChw8c, OH, OW, by_rows ? 0 : part.m0,
                        m1, by_rows ? part.out_row : 0, by_rows ? part.out_row + part.out_rows : OH);
        }
      } catch (const dnnl::error&) {
        failed = true;  // a chunk must not throw (work_sharing.h)
      }
    });
    if (failed) throw std::runtime_error("oneDNN failed to run a Conv part it had accepted");
    if (plan.dst_reorder) {
      memory dst8(plan.dst8, cpu_engine(), y8), dst(plan.user_dst, cpu_engine(), y);
      OmpThreads copy_scope(threads_for(N * M * g.out[0] * g.out[1], threads));
      plan.dst_reorder->execute(stream, dst8, dst);
      stream.wait();
    }
  }

  // The whole Conv as one primitive on oneDNN's OpenMP threads, with reorders where its layouts differ from the
  // activations'.
  void run_whole(const Plan& plan, const ConvGeom& g, int64_t N, int64_t C, const float* x, const float* b,
                 float* y, int threads) {
    OmpThreads scope(threads);
    dnnl::stream stream(cpu_engine());
    memory src(plan.user_src, cpu_engine(), const_cast<float*>(x));
    memory dst(plan.user_dst, cpu_engine(), y);
    // Blocked copies of X and Y when the primitive wants them, in this thread's scratch (a fresh buffer per
    // call costs page faults on every run of the large early layers).
    const size_t src_floats = plan.src_reorder ? plan.pd.src_desc().get_size() / sizeof(float) + 16 : 0;
    const size_t dst_floats = plan.dst_reorder ? plan.pd.dst_desc().get_size() / sizeof(float) + 16 : 0;
    const size_t pad_floats = aligned_floats(plan.pd.scratchpad_desc());
    float* scratch = scratch_floats(src_floats + dst_floats + pad_floats);
    memory conv_src = src, conv_dst = dst;
    // The reorders are plain copies: a second thread only for copies worth a wake-up (threading.h).
    const int64_t src_n = N * C * g.in[0] * g.in[1], dst_n = N * W_.dim(0) * g.out[0] * g.out[1];
    if (plan.src_reorder) {
      conv_src = memory(plan.pd.src_desc(), cpu_engine(), aligned64(scratch));
      OmpThreads copy_scope(threads_for(src_n, threads));
      plan.src_reorder->execute(stream, src, conv_src);
    }
    if (plan.dst_reorder) conv_dst = memory(plan.pd.dst_desc(), cpu_engine(), aligned64(scratch + src_floats));
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, conv_src}, {DNNL_ARG_WEIGHTS, plan.weights}, {DNNL_ARG_DST, conv_dst}};
    if (b) args.emplace(DNNL_ARG_BIAS, memory(plan.bias, cpu_engine(), const_cast<float*>(b)));
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 memory(plan.pd.scratchpad_desc(), cpu_engine(), aligned64(scratch + src_floats + dst_floats)));
    plan.conv.execute(stream, args);
    if (plan.dst_reorder) {
      OmpThreads copy_scope(threads_for(dst_n, threads));
      plan.dst_reorder->execute(stream, conv_dst, dst);
    }
    stream.wait();
  }

  // epilogue() on output channels [m0, m1) and rows [r0, r1) of one image at y, NCHW, nChw8c (m0 a multiple of 8
  // there) or NHWC (all channels: m0 = 0, m1 = M): the same operations on each value.
  void part_epilogue(const Plan& plan, float* y, Layout layout, int64_t OH, int64_t OW, int64_t m0, int64_t m1,
                     int64_t r0, int64_t r1) const {
    if (!act_.channels && plan.act_in_primitive) return;
    FusedActivation rest = act_;
    if (plan.act_in_primitive) rest.kind = FusedActivation::Kind::None;
    const int64_t plane = OH * OW, n = (r1 - r0) * OW;
    if (layout == Layout::NHWC) {
      apply_conv_epilogue_blocked(rest, y + r0 * OW * m1, n, 0, m1);
    } else if (layout == Layout::nChw8c) {
      for (int64_t m = m0; m < m1; m += kChannelBlock)
        apply_conv_epilogue_blocked(rest, y + m * plane + r0 * OW * kChannelBlock, n, m, kChannelBlock);
    } else {
      for (int64_t m = m0; m < m1; ++m) apply_conv_epilogue(rest, y + m * plane + r0 * OW, n, m);
    }
  }

  // The activation when it is not a post-op of the primitive, and the per-channel clamp and affine.
  void epilogue(const Plan& plan, const ConvGeom& g, int64_t N, float* y, int threads, ConvLayouts layouts) {
    const int64_t dst_n = N * W_.dim(0) * g.out[0] * g.out[1];
    if (act_.channels) {  // the activation too when it is not a post-op, then the per-channel clamp and affine
      FusedActivation rest = act_;
      if (plan.act_in_primitive) rest.kind = FusedActivation::Kind::None;
      const int64_t M = W_.dim(0), plane = g.out[0] * g.out[1];
      if (layouts.dst_blocked) {  // per block of interleaved channels (8, or all of them in NHWC)
        const int64_t B = channel_block(M), blocks = M / B;
        parallel_for(N * blocks, threads_for(N * M * plane, threads), [&](int64_t nb) {
          apply_conv_epilogue_blocked(rest, y + nb * B * plane, plane, nb % blocks * B, B);
        });
      } else {
        parallel_for(N * M, threads_for(N * M * plane, threads),
                     [&](int64_t nm) { apply_conv_epilogue(rest, y + nm * plane, plane, nm % M); });
      }
    } else if (!plan.act_in_primitive) {
      constexpr int64_t kChunk = 1 << 14;
      const int64_t n = dst_n, chunks = (n + kChunk - 1) / kChunk;
      parallel_for(chunks, threads_for(n, threads),
                   [&](int64_t c) { apply_activation(act_, y + c * kChunk, std::min(kChunk, n - c * kChunk)); });
    }
  }

  // A 1x1 Conv without groups, strides or pads: each output pixel reads its own input pixel only.
  bool pointwise(const ConvGeom& g) const {
    return group_ == 1 && W_.dim(2) == 1 && W_.dim(3) == 1 && g.strides[0] == 1 && g.strides[1] == 1 &&
           g.pads[0] == 0 && g.pads[1] == 0 && g.pads[2] == 0 && g.pads[3] == 0;
  }

  // False for im2col + GEMM and the reference loops: slower than a direct kernel on oneDNN's own layouts.
  static bool direct(const dnnl::convolution_forward::primitive_desc& pd) {
    const std::string impl = pd.impl_info_str();
    return impl.find("gemm") == std::string::npos && impl.find("ref") == std::string::npos;
  }

  // All of W (in user_w's layout) reordered into pd's weight layout: a copy another part of the plan already made
  // for that layout (row parts differ only in their rows), else a new one.
  memory shared_weights(const Plan& plan, const dnnl::convolution_forward::primitive_desc& pd,
                        const memory::desc& user_w, dnnl::stream& stream) const {
    for (const Part& other : plan.parts)
      if (other.pd.weights_desc() == pd.weights_desc()) return other.weights;
    memory weights(pd.weights_desc(), cpu_engine());
    memory wsrc(user_w, cpu_engine(), const_cast<float*>(W_.data<float>()));
    dnnl::reorder(wsrc, weights).execute(stream, wsrc, weights);
    return weights;
  }

  // The activations' layouts and the parts' (src8, dst8), with the copies between them where they differ.
  static void set_layouts(Plan& plan, const memory::desc& user_src, const memory::desc& user_dst,
                          const memory::desc& src8, const memory::desc& dst8) {
    plan.user_src = user_src;
    plan.user_dst = user_dst;
    plan.src8 = src8;
    plan.dst8 = dst8;
    if (user_src != src8)
      plan.src_reorder.emplace(dnnl::reorder::primitive_desc(cpu_engine(), user_src, cpu_engine(), src8));
    if (user_dst != dst8)
      plan.dst_reorder.emplace(dnnl::reorder::primitive_desc(cpu_engine(), dst8, cpu_engine(), user_dst));
  }

  // The Conv as parts along its output channels, each a one-thread primitive on nChw8c images (the activations'
  // blocked layout, read and written in place; plain activations are copied), run side by side on the kernels'
  // work sharing; nullptr when some part has no direct primitive on nChw8c.
  //
  // Why: oneDNN's OpenMP build opens a team region per primitive and per reorder, and every region waits at its
  // barrier for the woken worker. Where a wake-up is slow (a VM, 44-94 us a region on the 2-vCPU machine of
  // 2026-11-25, scripts/bench_omp_wake.sh) mobilenetv2 ran slower at 2 threads than at 1 (19-24 ms against 11);
  // and on an AVX-512 CPU oneDNN's own layout choice is nChw16c, so each Conv between nChw8c tensors also copied
  // its input and output. Parts give the caller work from the first microsecond and a late helper costs nothing
  // (work_sharing.h). Every part is built for and run on one thread; parts cost a little at one thread (each
  // reads the whole input), so one thread gets one part.
  // user_src / user_dst: the activations' layouts; src8 / dst8: the same tensors as nChw8c.
  template <typename ConvDesc>
  std::shared_ptr<Plan> build_parts(const ConvGeom& g, int64_t C, int threads, const memory::desc& user_src,
                                    const memory::desc& user_dst, const memory::desc& src8, const memory::desc& dst8,
                                    const dnnl::primitive_attr& attr, bool act_in_primitive,
                                    const ConvDesc& conv_desc) {
    const int64_t M = W_.dim(0), KH = W_.dim(2), KW = W_.dim(3), G = group_, Mg = M / G, Cg = C / G;
    // Cuts fall on multiples of 8 output channels (of 8 input channels too, on whole groups, for a grouped Conv),
    // so that a part's channels of an nChw8c image are one contiguous run (in NCHW they always are). A unit is
    // the smallest such cut: 8 output channels, or `per_unit` groups.
    int64_t per_unit = 1;
    if (G > 1) {
      while ((per_unit * Mg) % kChannelBlock != 0 || (per_unit * Cg) % kChannelBlock != 0) ++per_unit;
      per_unit = std::min(per_unit, G);
    }
    const int64_t units = G > 1 ? (G + per_unit - 1) / per_unit : (M + kChannelBlock - 1) / kChannelBlock;
    // Work of one image in GEMM-class multiply-adds; short dot products (depthwise) run at elementwise speed, about
    // four times slower (threading.h's two minimums). A part holds at least kPartWork of it (kGroupedPartWork with
    // groups).
    const int64_t kv = KH * KW, macs = M * g.out[0] * g.out[1] * Cg * kv;
    const int64_t work = Cg * kv < 64 ? macs * (kParallelMinMacs / kParallelMinWork) : macs;
    // part_count: one part on one thread, with more a multiple of the thread count. Parts of one Conv differ only
    // in which output channels they hold, and oneDNN's direct kernels compute each output channel's sum in the same
    // order whatever the others, so the output is bitwise the same at every thread count
    // (tests/kernels/conv_dnnl_test.cc checks it on shapes cut in 2 to 8 parts).
    // A part of a Conv without groups re-reads the whole input for its output channels; with 8 of them that costs
    // more than its share (1x1 Convs at one thread, the parts run one after another against one part: 144->24 at
    // 56x56 in three parts 1.82x, 96->24 1.77x, 32->16 at 112x112 in two 1.44x; parts of 16 or more channels
    // 1.02-1.16x; mobilenetv2, 2026-11-25), so such a part holds at least two units (16 channels).
    int64_t P = G > 1 ? part_count(work, units, threads, kGroupedPartWork)
                      : part_count(work, std::max<int64_t>(1, units / 2), threads);
    // A pointwise Conv with too few output channels for a part per thread (mobilenetv2's 16- and 24-channel
    // projections, 0.7 ms of its 7.7 at one thread, ran whole on one thread) is cut along its rows instead: rows of
    // an nChw8c image are a strided slice, which oneDNN runs only in its reference loops, so each part copies its
    // rows into a dense image first and its output rows back (run_parts). Each output value is the same sum over
    // the input channels whatever the image's height (tests/kernels/conv_dnnl_test.cc checks it bitwise).
    const int64_t R = pointwise(g) && P < threads ? part_count(work, g.out[0], threads) : 1;
    if (R > 1) P = R;
    OmpThreads one(1);
    auto plan = std::make_shared<Plan>();
    plan->act_in_primitive = act_in_primitive;
    plan->geom = RowGeom{g.in[0], g.in[1], g.out[0], g.out[1]};
    plan->src_image = static_cast<size_t>(round_up8(C) * g.in[0] * g.in[1]);
    plan->dst_image = static_cast<size_t>(round_up8(M) * g.out[0] * g.out[1]);
    dnnl::stream stream(cpu_engine());
    const auto f32 = memory::data_type::f32;
    try {
      set_layouts(*plan, user_src, user_dst, src8, dst8);
      plan->blocked_rows = R > 1;
      for (int64_t p = 0; R > 1 && p < P; ++p) {
        const int64_t r0 = p * g.out[0] / P, rows = (p + 1) * g.out[0] / P - r0;
        const memory::dims src{1, C, rows, g.in[1]}, dst{1, M, rows, g.out[1]}, w{M, C, 1, 1};
        const dnnl::convolution_forward::primitive_desc pd(
            conv_desc(memory::desc(src, f32, Tag::nChw8c), memory::desc(w, f32, Tag::any),
                      memory::desc({M}, f32, Tag::x), memory::desc(dst, f32, Tag::nChw8c)),
            attr, cpu_engine());
        if (!direct(pd)) return nullptr;
        const memory weights = shared_weights(*plan, pd, memory::desc(w, f32, Tag::oihw), stream);
        plan->parts.push_back(Part{0, 0, 0, r0, rows, r0, rows, pd, dnnl::convolution_forward(pd), weights});
      }
      for (int64_t p = 0; R == 1 && p < P; ++p) {
        const int64_t u0 = p * units / P, u1 = (p + 1) * units / P;
        // output channels [m0, m0 + mp) of groups [g0, g0 + gp), input channels [c0, c0 + cp)
        const int64_t g0 = G > 1 ? u0 * per_unit : 0, gp = G > 1 ? std::min(G, u1 * per_unit) - g0 : 1;
        const int64_t m0 = G > 1 ? g0 * Mg : u0 * kChannelBlock;
        const int64_t mp = G > 1 ? gp * Mg : std::min(M, u1 * kChannelBlock) - m0;
        const int64_t c0 = g0 * Cg, cp = gp * Cg;
        const memory::dims src{1, cp, g.in[0], g.in[1]}, dst{1, mp, g.out[0], g.out[1]};
        const memory::dims w = G == 1 ? memory::dims{mp, C, KH, KW} : memory::dims{gp, Mg, Cg, KH, KW};
        const memory::desc user_w(w, f32, G == 1 ? Tag::oihw : Tag::goihw);
        const dnnl::convolution_forward::primitive_desc pd(
            conv_desc(memory::desc(src, f32, Tag::nChw8c), memory::desc(w, f32, Tag::any),
                      memory::desc({mp}, f32, Tag::x), memory::desc(dst, f32, Tag::nChw8c)),
            attr, cpu_engine());
        if (!direct(pd)) return nullptr;
        Part part{m0,
                  c0 * g.in[0] * g.in[1],
                  m0 * g.out[0] * g.out[1],
                  0,
                  0,
                  0,
                  0,
                  pd,
                  dnnl::convolution_forward(pd),
                  memory(pd.weights_desc(), cpu_engine())};
        memory wsrc(user_w, cpu_engine(), const_cast<float*>(W_.data<float>()) + m0 * Cg * kv);
        dnnl::reorder(wsrc, part.weights).execute(stream, wsrc, part.weights);
        plan->parts.push_back(std::move(part));
      }
      stream.wait();
    } catch (const dnnl::error&) {
      return nullptr;
    }
    return plan;
  }

  // A dense Conv whose own layout is NHWC, as parts along its output rows: each a one-thread primitive on a run of
  // whole rows of the NHWC image (its input rows, the halo included, and its output rows are contiguous there), with
  // the pads its rows need. Channels cannot be cut in NHWC (a slice of them is strided, and oneDNN runs strided
  // tensors only in its reference loops). nullptr when some part has no direct primitive.
  // Why: the whole Conv on oneDNN's OpenMP threads waits at every region's barrier for the woken worker (44-94 us on
  // the 2-vCPU VM, a scheduler slice on a busy machine), so below kWholeParallelMacs it ran on one thread and the
  // second one idled through mobilenetv2's 1x1 Convs from 28x28 down (about a third of its time); above, rows on the
  // work sharing beat it too (2 threads, quiet: ppocrv4-rec 12.2-13.2 -> 10.8-11.3 ms, det 78-80 -> 73-79,
  // 2026-11-25 16:25). Rows keep every output value's sum over input channels and kernel taps as the whole image's
  // primitive computes it (tests/kernels/conv_dnnl_test.cc checks 1 against 2, 3 and 8 threads bitwise).
  template <typename ConvDesc>
  std::shared_ptr<Plan> build_rows(const ConvGeom& g, int64_t C, int threads, const memory::desc& user_src,
                                   const memory::desc& user_dst, const dnnl::primitive_attr& attr,
                                   bool act_in_primitive, const ConvDesc& conv_desc) {
    const int64_t M = W_.dim(0), KH = W_.dim(2), KW = W_.dim(3), G = group_, Cg = C / G;
    // A pointwise Conv (1x1, stride 1, no pads) reads only each output pixel's own input pixel, so its image is cut
    // by pixels instead of rows: as a column of H x W one-pixel rows (the same memory in NCHW, nChw8c and NHWC), each
    // part a primitive on one row of its pixels. The parts are then even however few rows the image has
    // (ppocrv4-rec's 480-channel Convs on 6 and 3 rows: 2 parts of 3 rows, or of 1 and 2 rows).
    const bool pixels = pointwise(g);
    const RowGeom geom =
        pixels ? RowGeom{g.in[0] * g.in[1], 1, g.out[0] * g.out[1], 1} : RowGeom{g.in[0], g.in[1], g.out[0], g.out[1]};
    const int64_t H = geom.H, Wd = geom.W, OH = geom.OH, OW = geom.OW;
    // Work as build_parts counts it: short dot products (depthwise) at elementwise speed, a grouped Conv's part
    // holding kGroupedPartWork.
    const int64_t kv = KH * KW, macs = M * OH * OW * Cg * kv;
    const int64_t work = Cg * kv < 64 ? macs * (kParallelMinMacs / kParallelMinWork) : macs;
    const int64_t P = part_count(work, OH, threads, G > 1 ? kGroupedPartWork : kPartWork);
    OmpThreads one(1);
    auto plan = std::make_shared<Plan>();
    plan->act_in_primitive = act_in_primitive;
    plan->src_image = static_cast<size_t>(C * H * Wd);
    plan->dst_image = static_cast<size_t>(M * OH * OW);
    const auto f32 = memory::data_type::f32;
    const memory::dims w_dims = G == 1 ? memory::dims{M, C, KH, KW} : memory::dims{G, M / G, Cg, KH, KW};
    const memory::desc user_w(w_dims, f32, G == 1 ? Tag::oihw : Tag::goihw);
    const int64_t extent = (KH - 1) * g.dilations[0] + 1, s = g.strides[0], pad_top = g.pads[0];
    dnnl::stream stream(cpu_engine());
    try {
      // each part copies its own rows of the activations (run_parts), so no reorders
      plan->rows = true;
      plan->geom = geom;
      plan->src = layout_of(user_src);
      plan->dst = layout_of(user_dst);
      for (int64_t p = 0; p < P; ++p) {
        const int64_t oh0 = p * OH / P, oh1 = (p + 1) * OH / P;
        // input rows [first, last] of output rows [oh0, oh1), then clipped to the image; the clipped rows are pads
        const int64_t first = oh0 * s - pad_top, last = (oh1 - 1) * s - pad_top + extent - 1;
        const int64_t ih0 = std::max<int64_t>(0, first), ih1 = std::min(H - 1, last);
        const memory::dims src = pixels ? memory::dims{1, C, 1, ih1 - ih0 + 1} : memory::dims{1, C, ih1 - ih0 + 1, Wd};
        const memory::dims dst = pixels ? memory::dims{1, M, 1, oh1 - oh0} : memory::dims{1, M, oh1 - oh0, OW};
        const dnnl::convolution_forward::primitive_desc pd(
            conv_desc(memory::desc(src, f32, Tag::nhwc), memory::desc(w_dims, f32, Tag::any),
                      memory::desc({M}, f32, Tag::x), memory::desc(dst, f32, Tag::nhwc), {ih0 - first, g.pads[1]},
                      {last - ih1, g.pads[3]}),
            attr, cpu_engine());
        if (!direct(pd)) return nullptr;
        const memory weights = shared_weights(*plan, pd, user_w, stream);
        Part part{0, ih0 * Wd * C, oh0 * OW * M, ih0, ih1 - ih0 + 1, oh0, oh1 - oh0, pd, dnnl::convolution_forward(pd),
                  weights};
        // NCHW slabs of the part's rows: all channels, rows [ih0, ih1] (or its pixels), as strided views
        if (plan->src == Layout::NCHW) {
          part.src_slab = memory::desc(src, f32, memory::dims{C * H * Wd, H * Wd, Wd, 1});
          part.src_copy.emplace(
              dnnl::reorder::primitive_desc(cpu_engine(), part.src_slab, cpu_engine(), pd.src_desc()));
        }
        if (plan->dst == Layout::NCHW) {
          part.dst_slab = memory::desc(dst, f32, memory::dims{M * OH * OW, OH * OW, OW, 1});
          part.dst_copy.emplace(
              dnnl::reorder::primitive_desc(cpu_engine(), pd.dst_desc(), cpu_engine(), part.dst_slab));
        }
        plan->parts.push_back(std::move(part));
      }
      stream.wait();
    } catch (const dnnl::error&) {
      return nullptr;
    }
    return plan;
  }

  std::shared_ptr<const Plan> build(const ConvGeom& g, int64_t N, int64_t C, int threads, ConvLayouts layouts) {
    const int64_t M = W_.dim(0), KH = W_.dim(2), KW = W_.dim(3);
    const memory::dims src_dims{N, C, g.in[0], g.in[1]}, dst_dims{N, M, g.out[0], g.out[1]};
    const memory::dims w_dims =
        group_ == 1 ? memory::dims{M, C, KH, KW} : memory::dims{group_, M / group_, C / group_, KH, KW};
    // blocked_layout.h's layout: nChw8c [N, C/8, H, W, 8], or NHWC [N, 1, H, W, C] on AVX-512.
    const Tag blocked = blocked_layout_is_nhwc() ? Tag::nhwc : Tag::nChw8c;
    const memory::desc user_src(src_dims, memory::data_type::f32, layouts.src_blocked ? blocked : Tag::nchw);
    const memory::desc user_dst(dst_dims, memory::data_type::f32, layouts.dst_blocked ? blocked : Tag::nchw);
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
    auto conv_desc_padded = [&](const memory::desc& src, const memory::desc& w, const memory::desc& b,
                                const memory::desc& dst, const memory::dims& pad_begin, const memory::dims& pad_end) {
      return dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                             src, w, has_bias_ ? b : memory::desc(), dst, {g.strides[0], g.strides[1]},
                                             {g.dilations[0] - 1, g.dilations[1] - 1}, pad_begin, pad_end);
    };
    auto conv_desc = [&](const memory::desc& src, const memory::desc& w, const memory::desc& b,
                         const memory::desc& dst) {
      return conv_desc_padded(src, w, b, dst, {g.pads[0], g.pads[1]}, {g.pads[2], g.pads[3]});
    };
    // Which kernels run a Conv depends on its shape alone, never on the activations' layouts or the thread count,
    // so a Conv gives the same values whichever tensors are kept blocked and however many threads run it. Parts
    // on nChw8c (run_parts), unless oneDNN's own choice of layouts is another one and the Conv is dense enough to
    // pay for copying into it: on a CPU with AVX-512 that choice is nChw16c or NHWC, whose AVX-512 kernels are
    // faster than the AVX2 ones that read nChw8c. Copies cost about one pass over the input and one over the output;
    // from kDenseMacs multiply-adds per element copied the faster kernel wins (ppocrv4-rec, -det and mobilenetv2
    // each ran fastest with the cut between 32 and 64 at 1 thread, 2026-11-25, docs/benchmarks.md). Such a Conv
    // whose own layout is NHWC runs as row parts on NHWC (build_rows), whatever its size. oneDNN's own choice is
    // asked for one thread, so that the choice cannot change with the thread count.
    // Where the blocked layout is NHWC (AVX-512), every Conv with a direct NHWC kernel runs as row parts on NHWC,
    // whatever the activations' layouts (NCHW ones are copied row by row in the parts), so that the kernel still
    // depends on the shape alone: oneDNN's AVX-512 pointwise and depthwise kernels on NHWC beat its AVX2 ones on
    // nChw8c by 1.7-1.9x and its nChw16c ones need no fewer copies (docs/interpreter.md "NHWC between Convs on
    // AVX-512").
    if (blocked_layout_is_nhwc()) {
      if (auto plan = build_rows(g, C, threads, user_src, user_dst, attr, act_in_primitive, conv_desc_padded))
        return plan;
    }
    const int64_t macs = N * M * g.out[0] * g.out[1] * (C / group_) * KH * KW;
    const int64_t copied = N * (C * g.in[0] * g.in[1] + M * g.out[0] * g.out[1]);
    // The whole Conv opens OpenMP regions (copies and convolution) whose barriers wait for woken workers; below
    // kWholeParallelMacs it runs on one thread.
    const int whole_threads = macs >= kWholeParallelMacs ? threads : 1;
    std::optional<dnnl::convolution_forward::primitive_desc> whole;
    {
      OmpThreads one(1);
      try {
        whole.emplace(conv_desc(any_src, any_w, bias, any_dst), attr, cpu_engine());
      } catch (const dnnl::error&) {
        // no primitive in oneDNN's own layouts: parts or nothing
      }
    }
    const memory::desc src8(src_dims, memory::data_type::f32, Tag::nChw8c);
    const memory::desc dst8(dst_dims, memory::data_type::f32, Tag::nChw8c);
    const bool own_is_8c = whole && whole->src_desc() == src8 && whole->dst_desc() == dst8;
    const memory::desc own_nhwc_src(src_dims, memory::data_type::f32, Tag::nhwc);
    const memory::desc own_nhwc_dst(dst_dims, memory::data_type::f32, Tag::nhwc);
    const bool own_is_nhwc = whole && whole->src_desc() == own_nhwc_src && whole->dst_desc() == own_nhwc_dst;
    if (!whole || own_is_8c || macs < kDenseMacs * copied) {
      if (auto plan = build_parts(g, C, threads, user_src, user_dst, src8, dst8, attr, act_in_primitive, conv_desc))
        return plan;
    }
    if (!whole) return nullptr;  // no oneDNN primitive for this shape: the own kernel runs it
    if (own_is_nhwc) {
      if (auto plan = build_rows(g, C, threads, user_src, user_dst, attr, act_in_primitive, conv_desc_padded))
        return plan;
    }
    OmpThreads scope(whole_threads);
    try {
      const dnnl::convolution_forward::primitive_desc pd =
          whole_threads > 1
              ? dnnl::convolution_forward::primitive_desc(conv_desc(any_src, any_w, bias, any_dst), attr, cpu_engine())
              : *whole;
      auto plan = std::make_shared<Plan>();
      plan->pd = pd;
      plan->conv = dnnl::convolution_forward(pd);
      plan->user_src = user_src;
      plan->user_dst = user_dst;
      plan->bias = bias;
      plan->weights = memory(pd.weights_desc(), cpu_engine());
      plan->act_in_primitive = act_in_primitive;
      plan->whole_threads = whole_threads;
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
  // Multiply-adds per element copied from which oneDNN's own layouts pay for the copies (see build).
  static constexpr int64_t kDenseMacs = 48;
  // Multiply-adds from which a whole Conv (one whose own layout is neither nChw8c nor NHWC) runs on more than one
  // OpenMP thread: 2^24 is about 0.5 ms on one thread, against three team wake-ups (44-94 us each where they are
  // slow, docs/benchmarks.md 2026-11-25).
  static constexpr int64_t kWholeParallelMacs = int64_t{1} << 24;
  std::mutex mutex_;
  std::map<Key, std::shared_ptr<const Plan>> plans_;  // nullptr: oneDNN declined this shape
  std::deque<Key> order_;                             // keys of plans_, oldest first
};

}  // namespace

bool dnnl_conv_available() { return true; }

bool dnnl_conv_avx512() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (isa & avx512) == avx512;  // oneDNN's ISA values are nested bit masks
}

std::unique_ptr<DnnlConv> make_dnnl_conv(const Tensor& W, int64_t group, bool has_bias, const FusedActivation& act) {
  if (W.dtype() != DType::Float32 || W.rank() != 4) return nullptr;
  return std::make_unique<DnnlConvImpl>(W, group, has_bias, act);
}
#else
bool dnnl_conv_available() { return false; }
bool dnnl_conv_avx512() { return false; }
std::unique_ptr<DnnlConv> make_dnnl_conv(const Tensor&, int64_t, bool, const FusedActivation&) { return nullptr; }
#endif

}  // namespace qtool::runtime::kernels::compute
