// Targets that read files: the model loader and the tensor readers (fuzz/targets.h).
#include "targets.h"

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "inspect/inspect.h"
#include "onnx/model_io.h"
#include "tensorio/tensorio.h"

namespace qtool::fuzz {
namespace {

namespace fs = std::filesystem;

// A folder of this process's own (under /dev/shm when there is one), created once and reused per input.
const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    const fs::path base = fs::is_directory("/dev/shm") ? fs::path("/dev/shm") : fs::temp_directory_path();
    fs::path d = base / ("qtool-fuzz-" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

// Replaces `name` in the scratch folder by `bytes`.
fs::path write_scratch(const std::string& name, std::string_view bytes) {
  const fs::path p = scratch_dir() / name;
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return p;
}

// The first of two entries a target runs on one input: its typed bad-input error is the expected answer, and
// the second entry still runs (it must answer the same input on its own).
template <class Entry>
void first_of_two(Entry entry) {
  try {
    entry();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Internal) throw;
  }
}

}  // namespace

void model(std::string_view bytes) {
  size_t split = bytes.size();
  if (bytes.size() >= 4) {
    uint32_t n = 0;
    std::memcpy(&n, bytes.data() + bytes.size() - 4, 4);
    bytes.remove_suffix(4);
    split = std::min<size_t>(n, bytes.size());
  }
  const fs::path path = write_scratch("model.onnx", bytes.substr(0, split));
  write_scratch("data.bin", bytes.substr(split));
  first_of_two([&] { (void)onnxio::load_model(path); });
  (void)inspect::inspect_model(path);
}

void npy(std::string_view bytes) { (void)tensorio::read_tensor_file(write_scratch("x.npy", bytes)); }

void npz(std::string_view bytes) {
  const fs::path path = write_scratch("x.npz", bytes);
  first_of_two([&] { (void)tensorio::read_npz(path); });
  (void)tensorio::read_tensor_file(path);
}

void pb(std::string_view bytes) { (void)tensorio::read_tensor_file(write_scratch("x.pb", bytes)); }

}  // namespace qtool::fuzz
