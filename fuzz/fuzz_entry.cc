// libFuzzer entry of one target: QTOOL_FUZZ_TARGET names its body in fuzz/targets.h (fuzz/CMakeLists.txt
// builds this file once per target). The library's typed errors are expected; anything else escapes and
// libFuzzer reports it as a crash.
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    qtool::fuzz::QTOOL_FUZZ_TARGET({reinterpret_cast<const char*>(data), size});
  } catch (const qtool::Error& e) {
    if (e.kind() == qtool::ErrorKind::Internal) throw;
  }
  return 0;
}
