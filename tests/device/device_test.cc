// --device parsing and selection: the CPU always exists; asking for a CUDA device that is not there is a one-line
// UnsupportedError (exit 2) that names the reason and the fix.
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <catch2/catch.hpp>
#include <sstream>
#include <string>

#include "core/error.h"
#include "device/device.h"
#include "runtime/graph.h"
#include "runtime/kernel.h"
#include "runtime/model_builder.h"

using namespace qtool;
using namespace qtool::device;

TEST_CASE("device flag parses cpu, cuda and cuda:N and refuses anything else with the accepted forms") {
  CHECK(parse_device("cpu") == DeviceSpec{DeviceKind::Cpu, 0});
  CHECK(parse_device("cuda") == DeviceSpec{DeviceKind::Cuda, 0});
  CHECK(parse_device("cuda:3") == DeviceSpec{DeviceKind::Cuda, 3});
  CHECK(device_name(parse_device("cuda:3")) == "cuda:3");
  CHECK(device_name(parse_device("cpu")) == "cpu");
  for (const char* bad : {"gpu", "cuda:", "cuda:-1", "cuda:1x", "CUDA", ""}) {
    INFO(bad);
    try {
      parse_device(bad);
      FAIL("accepted");
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()).find("expected cpu, cuda or cuda:N") != std::string::npos);
    }
  }
}

TEST_CASE("selecting a CUDA device that is not there is a one-line error naming the fix (exit 2)") {
  select_device(parse_device("cpu"));  // always there
  const CudaProbe p = probe_cuda();
  const DeviceSpec missing{DeviceKind::Cuda, p.count};  // one past the last device (cuda:0 when there is none)
  try {
    select_device(missing);
    FAIL("selected a missing device");
  } catch (const UnsupportedError& e) {
    const std::string m = e.what();
    CHECK(m.starts_with("no CUDA device: "));
    CHECK(m.ends_with("; use --device cpu"));
    CHECK(m.find('\n') == std::string::npos);
    CHECK(exit_code_for(e.kind()) == kExitBadInput);
  }
}

TEST_CASE("under --device cuda every op still finds a kernel: GPU rows have CPU twins, other ops take the CPU row") {
  for (const runtime::KernelDef& gpu : runtime::registered_cuda_kernels()) {
    INFO(gpu.op_type);
    CHECK(runtime::is_gpu_row(&gpu));
    for (int opset = gpu.since_version; opset <= gpu.until_version; ++opset) {
      const runtime::KernelDef* cpu = runtime::find_kernel(gpu.domain, gpu.op_type, opset, DeviceKind::Cpu);
      REQUIRE(cpu != nullptr);  // the fallback every GPU kernel hands unsupported inputs to
      CHECK_FALSE(runtime::is_gpu_row(cpu));
    }
  }
  for (const runtime::KernelDef& k : runtime::registered_kernels()) {
    if (k.make == nullptr) continue;  // the registry's sentinel
    INFO(k.op_type);
    const runtime::KernelDef* d = runtime::find_kernel(k.domain, k.op_type, k.since_version, DeviceKind::Cuda);
    REQUIRE(d != nullptr);
    CHECK(d->op_type == k.op_type);
  }
}

TEST_CASE("under --device cuda, -v names each node without a GPU row once, when the model is prepared") {
  test::ModelBuilder m(13);
  m.input("x", DType::Float32, {1, 3, 8, 8});
  m.initializer("w", Tensor::zeros(DType::Float32, {4, 3, 3, 3}));
  m.node("Conv", {"x", "w"}, {"c"}, "conv1");
  m.node("Relu", {"c"}, {"r"}, "relu1");
  m.node("GlobalAveragePool", {"r"}, {"y"}, "pool1");
  m.output("y");

  std::ostringstream log;
  const auto previous = spdlog::default_logger();
  auto capture = std::make_shared<spdlog::logger>("capture", std::make_shared<spdlog::sinks::ostream_sink_mt>(log));
  capture->set_pattern("%l: %v");
  capture->set_level(spdlog::level::debug);
  spdlog::set_default_logger(capture);
  const auto graph = runtime::Graph::from_model(m.model, {.device = DeviceKind::Cuda});  // kernels made, none run
  spdlog::set_default_logger(previous);

  const std::string text = log.str();
  for (const char* node : {"Conv 'conv1'", "Relu 'relu1'", "GlobalAveragePool 'pool1'"}) {
    const std::string op = std::string(node).substr(0, std::string(node).find(' '));
    const bool gpu_row = runtime::is_gpu_row(runtime::find_kernel("", op, 13, DeviceKind::Cuda));
    const std::string line = std::string("debug: ") + node + ": no GPU kernel; runs on the CPU\n";
    size_t count = 0;
    for (size_t at = text.find(line); at != std::string::npos; at = text.find(line, at + 1)) ++count;
    INFO(text);
    // A GPU row's node says where it runs on its first run (runs on the GPU, or why it falls back), not here.
    CHECK(count == (gpu_row ? 0u : 1u));
  }
}
