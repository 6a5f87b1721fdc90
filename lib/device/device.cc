#include "device/device.h"

#include <charconv>

#include "core/error.h"

namespace qtool::device {

DeviceSpec parse_device(std::string_view text, std::string_view flag) {
  if (text == "cpu") return {DeviceKind::Cpu, 0};
  if (text == "cuda") return {DeviceKind::Cuda, 0};
  if (text.starts_with("cuda:")) {
    const std::string_view n = text.substr(5);
    int index = -1;
    const auto [end, ec] = std::from_chars(n.data(), n.data() + n.size(), index);
    if (ec == std::errc() && end == n.data() + n.size() && !n.empty() && index >= 0) return {DeviceKind::Cuda, index};
  }
  throw UsageError(std::string(flag) + " '" + std::string(text) + "': expected cpu, cuda or cuda:N (N >= 0)");
}

std::string device_name(const DeviceSpec& d) {
  return d.kind == DeviceKind::Cpu ? "cpu" : "cuda:" + std::to_string(d.index);
}

void select_device(const DeviceSpec& d) {
  if (d.kind == DeviceKind::Cpu) return;
  const CudaProbe p = probe_cuda();
  if (p.count == 0) throw UnsupportedError("no CUDA device: " + p.why + "; use --device cpu");
  if (d.index >= p.count)
    throw UnsupportedError("no CUDA device: " + device_name(d) + " asked for, " + std::to_string(p.count) +
                           " present (cuda:0..cuda:" + std::to_string(p.count - 1) + "); use --device cpu");
  make_current(d.index);
}

}  // namespace qtool::device
