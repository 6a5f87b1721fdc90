// Which device runs the hot loops: `--device cpu|cuda[:N]`, parsed once at the edge.
//
// The CLI parses the flag (parse_device), then select_device checks that the device exists and makes it current
// (a one-line UnsupportedError, exit 2, when it does not). Code below the CLI only sees the backends chosen from it
// (calib::observer_backend, the runtime's kernel rows); nothing else asks which device it runs on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace qtool::device {

enum class DeviceKind : uint8_t { Cpu, Cuda };

struct DeviceSpec {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;  // the CUDA device ordinal (cuda:N); 0 for the CPU
  bool operator==(const DeviceSpec&) const = default;
};

// "cpu", "cuda" (= cuda:0) or "cuda:N"; UsageError naming `flag` and the accepted forms otherwise.
DeviceSpec parse_device(std::string_view text, std::string_view flag = "--device");
std::string device_name(const DeviceSpec& d);  // "cpu", "cuda:0"

// What the CUDA runtime reports. count = 0 with `why` filled when there is no usable device (a build without
// CUDA, no driver, no GPU).
struct CudaProbe {
  int count = 0;
  std::string why;
};
CudaProbe probe_cuda();  // device/cuda_probe.cc (CUDA builds) or cuda_probe_none.cc
void make_current(int cuda_index);  // cudaSetDevice; InternalError when it fails
// The current CUDA device is per host thread: a CUDA backend calls this first on whichever thread runs it
// (observer workers included), to use the device select_device made current.
void bind_selected_device();

// Checks that `d` exists and makes it the current device of this process. UnsupportedError
// "no CUDA device: <why>; use --device cpu" when it does not.
void select_device(const DeviceSpec& d);

}  // namespace qtool::device
