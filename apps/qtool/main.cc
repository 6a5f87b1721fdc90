// qtool: post-training quantization of ONNX models.
// main() owns option parsing, logging set-up and the single place where errors become exit codes.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "command.h"
#include "file_guard.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/omp_wait.h"
#include "core/version.h"

namespace {

constexpr const char* kFooter = R"(Exit codes:
  0  success
  1  usage error (unknown option, missing argument)
  2  bad input (missing, truncated or malformed model, config or data; unsupported op or dtype; quantize: a
     model already quantized, nothing left for the config)
  3  internal error (a bug in qtool: please report it)
  4  quantize: the accuracy guard could not meet every output's threshold (see --allow-below-target)

Run 'qtool COMMAND --help' for the options of a command.
)";

void setup_logging(int verbosity, bool quiet) {
  auto logger = spdlog::stderr_color_mt("qtool");
  logger->set_pattern("%^%l%$: %v");
  spdlog::set_default_logger(logger);
  spdlog::set_level(quiet ? spdlog::level::err
                          : verbosity >= 2 ? spdlog::level::trace
                          : verbosity == 1 ? spdlog::level::debug
                                           : spdlog::level::info);
}

// Errors are one line: names taken from a (possibly corrupt) model may hold newlines or control bytes.
std::string one_line(const char* message) {
  std::string out;
  for (const char* c = message; *c; ++c) {
    const auto u = static_cast<unsigned char>(*c);
    if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", u);
      out += buf;
    } else {
      out += *c;
    }
  }
  return out;
}

// The interpreter allocates and frees activations on every forward pass. glibc's defaults return big
// freed blocks to the kernel (munmap, or trimming the heap top), so the next pass page-faults the same
// megabytes in again: about 2200 faults and a quarter of the CPU time per mobilenetv2 pass. Keeping
// blocks up to 64 MiB on the heap and trimming only above 256 MiB free removes that, at the cost of
// holding freed memory (ppocrv4-det peak RSS 281 -> 321 MiB). The CLI owns the process, so it decides;
// MALLOC_MMAP_THRESHOLD_ / MALLOC_TRIM_THRESHOLD_ in the environment win.
void keep_freed_activations_mapped() {
#if defined(__GLIBC__)
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, 64 << 20);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

}  // namespace

int main(int argc, char** argv) {
  qtool::core::adopt_thread_environment(argv);  // before anything else: may re-execute the program
  qtool::fileio::install_cleanup_signal_handlers();  // first: a signal must never leave a temporary file behind
  qtool::fileio::remember_inputs(true);              // no command writes over a file it read
  CLI::App app{"qtool " QTOOL_VERSION " - post-training quantization of ONNX models", "qtool"};
  app.footer(kFooter);
  app.set_version_flag("--version", "qtool " QTOOL_VERSION);
  app.require_subcommand(1);
  int verbosity = 0;
  bool quiet = false;
  app.add_flag("-v,--verbose", verbosity, "More log output (-vv for trace)");
  app.add_flag("-q,--quiet", quiet, "Only print errors");

  // Every subcommand, in the order --help lists them.
  std::vector<std::pair<CLI::App*, qtool::cli::Action>> commands;
  auto add = [&](qtool::cli::Action (*fn)(CLI::App&)) {
    const size_t before = app.get_subcommands({}).size();
    qtool::cli::Action action = fn(app);
    commands.emplace_back(app.get_subcommands({}).at(before), std::move(action));
  };
  add(qtool::cli::add_inspect_command);
  add(qtool::cli::add_convert_command);
  add(qtool::cli::add_run_command);
  add(qtool::cli::add_calibrate_command);
  add(qtool::cli::add_quantize_command);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? qtool::kExitOk : qtool::kExitUsage;
  }

  setup_logging(verbosity, quiet);
  keep_freed_activations_mapped();
  try {
    for (auto& [sub, action] : commands)
      if (sub->parsed()) {
        qtool::cli::guard_files(*sub);
        return action();
      }
    return qtool::kExitUsage;
  } catch (const qtool::Error& e) {
    spdlog::error("{}", one_line(e.what()));
    return qtool::exit_code_for(e.kind());
  } catch (const std::bad_alloc&) {
    spdlog::error("out of memory");
    return qtool::kExitInternal;
  } catch (const std::exception& e) {
    spdlog::error("internal error: {}", one_line(e.what()));
    return qtool::kExitInternal;
  }
}
