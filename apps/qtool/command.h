// How a subcommand plugs into the CLI: it declares its options on its own CLI11 subcommand and
// returns the action to run when that subcommand was chosen. Each action is a thin shell over
// one library call; errors propagate as qtool::Error and are turned into exit codes in main().
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace qtool::calib {
struct CalibrateOptions;
}

namespace qtool::cli {

using Action = std::function<int()>;  // returns the exit code

// One function per subcommand, each in its own cmd_*.cc file, listed in main.cc.
Action add_inspect_command(CLI::App& app);
Action add_convert_command(CLI::App& app);
Action add_run_command(CLI::App& app);
Action add_calibrate_command(CLI::App& app);
Action add_quantize_command(CLI::App& app);

// Where sample inputs come from: --data NAME=FILE|FILE|DIR, --random N, --seed, --shape NAME=d0,d1.
struct SampleArgs {
  std::vector<std::string> data, shapes;
  int64_t random = 0;
  uint64_t seed = 0;
};
struct SampleOptions {
  CLI::Option *data = nullptr, *random = nullptr;  // for excludes()
};
// Declares those four options on `sub` (cmd_calibrate.cc); the help of --data and --random says what the samples
// are for. `qtool calibrate` and `qtool inspect --against` read their samples through them.
SampleOptions add_sample_options(CLI::App& sub, SampleArgs& a, const std::string& data_help,
                                 const std::string& random_help);

// --data NAME=FILE|FILE|DIR, --random N, --seed, --shape NAME=d0,d1 into calibrate options (cmd_calibrate.cc);
// `qtool quantize` calibrates with the same options.
void calibrate_data_options(const std::vector<std::string>& data, int64_t random, uint64_t seed,
                            const std::vector<std::string>& shapes, calib::CalibrateOptions& o);

}  // namespace qtool::cli
