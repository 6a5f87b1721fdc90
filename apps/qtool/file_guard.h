// Before a command runs: every path it will read is declared an input and an output naming one of them is
// refused (docs/reliability.md, "Files"). One table of option names serves every subcommand.
#pragma once

#include <CLI/CLI.hpp>

namespace qtool::cli {

// Reads MODEL, --config, --calib, --data and --input (NAME=PATH or PATH) of the chosen subcommand as inputs
// (fileio::protect_input) and checks -o/--output (a file: fileio::check_output_target) or --output-dir (a folder
// that exists must be a folder). BadInputError, naming both paths, when the output is an input; the writers check
// again when they open the file, so this is the early half of the rule.
void guard_files(const CLI::App& sub);

}  // namespace qtool::cli
