// --max-memory, --max-loop-iterations and --max-tensor-bytes, shared by the subcommands that run a model (run,
// calibrate, quantize).
#pragma once

#include <CLI/CLI.hpp>

namespace qtool::cli {

// Declares the options on `sub`; when given they set the process-wide limits (core/limits.h, core/file_io.h) at
// parse time.
void add_limit_options(CLI::App& sub);

}  // namespace qtool::cli
