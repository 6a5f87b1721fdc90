// qtool inspect MODEL [--json]  (filled in by the foundation issue)
#include "command.h"
#include "core/error.h"

namespace qtool::cli {
Action add_inspect_command(CLI::App& app) {
  auto* sub = app.add_subcommand("inspect", "Summarise an ONNX model: inputs, outputs, ops, parameters, quantization");
  auto model = std::make_shared<std::string>();
  sub->add_option("MODEL", *model, "Path to an .onnx model")->required();
  return [model]() -> int { throw UnsupportedError("inspect: not implemented yet"); };
}
}  // namespace qtool::cli
