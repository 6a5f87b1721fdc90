// --device parsing and selection: the CPU always exists; asking for a CUDA device that is not there is a one-line
// UnsupportedError (exit 2) that names the reason and the fix.
#include <catch2/catch.hpp>
#include <string>

#include "core/error.h"
#include "device/device.h"
#include "runtime/kernel.h"

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
