// The bodies of the libFuzzer targets, one function per input format the CLI reads. Each feeds `bytes` to the
// library entry the CLI uses and returns normally or throws the library's typed error (qtool::Error of kind
// BadInput or Unsupported: the expected answer to hostile bytes). Anything else — another exception, an
// InternalError, a sanitizer report, a hang — is a bug. fuzz/fuzz_<name>.cc wraps one of them for libFuzzer;
// tests/fuzz/ runs every input that once crashed one of them (the regression tests).
#pragma once

#include <string>
#include <string_view>

namespace qtool::fuzz {

// ONNX model loader with external data: load_model (external data read, as quantize/run/convert) and
// inspect_model (references validated only). Layout: model bytes, then the bytes of the companion file
// `data.bin`, then a 4-byte little-endian split point (the model's length, clamped).
void model(std::string_view bytes);
// QConfig JSON parser, then what quantize asks of a parsed config before it reads a model.
void qconfig(std::string_view bytes);
// Calibration-table parser; a table that parses must read back after qtool writes it.
void calib_table(std::string_view bytes);
// Tensor readers through read_tensor_file (and read_npz for .npz), from a file as the CLI reads them.
void npy(std::string_view bytes);
void npz(std::string_view bytes);
void pb(std::string_view bytes);

}  // namespace qtool::fuzz
