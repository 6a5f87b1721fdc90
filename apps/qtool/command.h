// How a subcommand plugs into the CLI: it declares its options on its own CLI11 subcommand and
// returns the action to run when that subcommand was chosen. Each action is a thin shell over
// one library call; errors propagate as qtool::Error and are turned into exit codes in main().
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace qtool::cli {

using Action = std::function<int()>;  // returns the exit code

// One function per subcommand, each in its own cmd_*.cc file, listed in main.cc.
Action add_inspect_command(CLI::App& app);
Action add_convert_command(CLI::App& app);
Action add_run_command(CLI::App& app);
Action add_calibrate_command(CLI::App& app);
Action add_quantize_command(CLI::App& app);

}  // namespace qtool::cli
