// --max-memory and --max-loop-iterations, shared by the subcommands that run a model (run, calibrate, quantize).
#pragma once

#include <CLI/CLI.hpp>

namespace qtool::cli {

// Declares both options on `sub`; when given they set the process-wide limits (core/limits.h) at parse time.
void add_limit_options(CLI::App& sub);

}  // namespace qtool::cli
