// Times oneDNN's Conv kernels on each activation layout qtool can keep between Convs (runtime/kernels/
// blocked_layout.h): nChw8c, nChw16c and NHWC, for a list of Conv shapes (scripts/bench/conv_shapes.py MODEL), each
// Conv alone on one thread with Relu6 as a post-op: the median of 7 runs of 50 forwards, the kernel oneDNN picks, and
// the sum per layout. A shape a layout cannot store without padding channels prints "-" there (its sum leaves it
// out). Why: docs/interpreter.md "NHWC between Convs on AVX-512".
// usage: OMP_NUM_THREADS=1 bench_conv_layouts SHAPES.txt
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#ifdef QTOOL_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>

int main(int argc, char** argv) {
  using dnnl::memory;
  using Tag = memory::format_tag;
  if (argc != 2) {
    std::fprintf(stderr, "usage: bench_conv_layouts SHAPES.txt (from scripts/bench/conv_shapes.py)\n");
    return 1;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::fprintf(stderr, "bench_conv_layouts: cannot read %s\n", argv[1]);
    return 2;
  }
  const dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream stream(eng);
  const Tag tags[3] = {Tag::nChw8c, Tag::nChw16c, Tag::nhwc};
  const char* names[3] = {"nChw8c", "nChw16c", "nhwc"};
  double total[3] = {0, 0, 0};
  const auto f32 = memory::data_type::f32;
  int64_t C, H, W, M, KH, KW, S, p0, p1, p2, p3, G;
  while (in >> C >> H >> W >> M >> KH >> KW >> S >> p0 >> p1 >> p2 >> p3 >> G) {
    const int64_t OH = (H + p0 + p2 - KH) / S + 1, OW = (W + p1 + p3 - KW) / S + 1;
    const memory::dims src{1, C, H, W}, dst{1, M, OH, OW};
    const memory::dims w = G == 1 ? memory::dims{M, C, KH, KW} : memory::dims{G, M / G, C / G, KH, KW};
    std::printf("%5lld %4lldx%-4lld -> %5lld k%lldx%lld s%lld g%-5lld", static_cast<long long>(C),
                static_cast<long long>(H), static_cast<long long>(W), static_cast<long long>(M),
                static_cast<long long>(KH), static_cast<long long>(KW), static_cast<long long>(S),
                static_cast<long long>(G));
    for (int t = 0; t < 3; ++t) {
      const int64_t block = t == 0 ? 8 : t == 1 ? 16 : 1;
      if (C % block != 0 || M % block != 0) {
        std::printf(" | %-7s %7s %-22s", names[t], "-", "");
        continue;
      }
      dnnl::post_ops ops;
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, 0.f, 6.f);
      dnnl::primitive_attr attr;
      attr.set_post_ops(ops);
      const dnnl::convolution_forward::desc desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, memory::desc(src, f32, tags[t]),
          memory::desc(w, f32, Tag::any), memory::desc({M}, f32, Tag::x), memory::desc(dst, f32, tags[t]), {S, S},
          {p0, p1}, {p2, p3});
      const dnnl::convolution_forward::primitive_desc pd(desc, attr, eng);
      memory x(pd.src_desc(), eng), weights(pd.weights_desc(), eng), bias(pd.bias_desc(), eng), y(pd.dst_desc(), eng);
      for (memory* mem : {&x, &weights, &bias}) {
        float* p = static_cast<float*>(mem->get_data_handle());
        std::fill(p, p + mem->get_desc().get_size() / sizeof(float), 0.01f);
      }
      dnnl::convolution_forward conv(pd);
      const std::unordered_map<int, memory> args{
          {DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_BIAS, bias}, {DNNL_ARG_DST, y}};
      for (int i = 0; i < 20; ++i) conv.execute(stream, args);
      stream.wait();
      std::vector<double> ms;
      for (int r = 0; r < 7; ++r) {
        const auto start = std::chrono::steady_clock::now();
        for (int i = 0; i < 50; ++i) conv.execute(stream, args);
        stream.wait();
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() / 50);
      }
      std::sort(ms.begin(), ms.end());
      total[t] += ms[3];
      std::printf(" | %-7s %7.3f %-22s", names[t], ms[3], std::string(pd.impl_info_str()).substr(0, 22).c_str());
    }
    std::printf("\n");
  }
  std::printf("sum (ms, shapes each layout stores): nChw8c %.3f  nChw16c %.3f  nhwc %.3f\n", total[0], total[1],
              total[2]);
  return 0;
}
#else
int main() {
  std::fprintf(stderr, "bench_conv_layouts: this build has no oneDNN (QTOOL_DNNL off)\n");
  return 2;
}
#endif
