#include "file_guard.h"

#include <sys/stat.h>

#include <string>

#include "core/error.h"
#include "core/file_io.h"

namespace qtool::cli {
namespace {

// Options whose values are paths the command reads, and the role named in errors.
struct InputOption {
  const char* name;  // as CLI11 finds it
  const char* role;
  bool spec;  // NAME=PATH or PATH
};
constexpr InputOption kInputOptions[] = {
    {"MODEL", "model", false},     {"--config", "--config", false}, {"--calib", "--calib", false},
    {"--data", "--data", true},    {"--input", "--input", true},
};

const CLI::Option* find(const CLI::App& sub, const char* name) {
  try {
    return sub.get_option(name);
  } catch (const CLI::OptionNotFound&) {
    return nullptr;
  }
}

}  // namespace

void guard_files(const CLI::App& sub) {
  for (const InputOption& in : kInputOptions) {
    const CLI::Option* opt = find(sub, in.name);
    if (!opt) continue;
    for (const std::string& value : opt->results()) {
      const size_t eq = in.spec ? value.find('=') : std::string::npos;
      fileio::protect_input(eq == std::string::npos ? value : value.substr(eq + 1), in.role);
    }
  }
  if (const CLI::Option* out = find(sub, "--output-dir"); out && !out->results().empty()) {
    const std::string& dir = out->results().front();
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      throw BadInputError("refusing to write outputs into '" + dir + "': it exists and is not a folder; give a " +
                          "folder or a new path with --output-dir");
  } else if (const CLI::Option* file = find(sub, "--output"); file && !file->results().empty()) {
    fileio::check_output_target(file->results().front());
  }
}

}  // namespace qtool::cli
