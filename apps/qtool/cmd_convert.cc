// qtool convert MODEL -o OUT [--external-data auto|always|never]: re-saves a model, moving tensor data
// into or out of an external data file. Both ends go through lib/onnx, so locations are checked on read
// and on write, the write is atomic and the input is never overwritten.
#include <spdlog/spdlog.h>

#include "command.h"
#include "onnx/model_io.h"

namespace qtool::cli {

Action add_convert_command(CLI::App& app) {
  auto* sub = app.add_subcommand(
      "convert", "Re-save an ONNX model with its weights inline or in an external data file (checked, atomic)");
  struct Opts {
    std::string model, out, external_file, mode = "auto";
    int64_t min_bytes = 1024;
  };
  auto o = std::make_shared<Opts>();
  sub->add_option("MODEL", o->model, "Path to an .onnx model (external data is read from its folder)")->required();
  sub->add_option("-o,--output", o->out, "Output .onnx path (must differ from MODEL)")->required();
  sub->add_option("--external-data", o->mode,
                  "auto (default): only when the weights exceed protobuf's 2 GB limit; always: tensors of at "
                  "least --external-min-bytes go to the external data file; never: everything inline")
      ->check(CLI::IsMember({"auto", "always", "never"}))
      ->option_text("auto|always|never");
  sub->add_option("--external-file", o->external_file,
                  "Name of the external data file, relative to OUT's folder (default: <OUT file name>.data)");
  sub->add_option("--external-min-bytes", o->min_bytes, "Smaller tensors stay inline (default 1024)")
      ->check(CLI::NonNegativeNumber);
  return [o]() -> int {
    // External data stays on disk: save_model streams it into the output's data file (memory: the graph and
    // one chunk, whatever the model's size).
    onnxio::LoadedModel in = onnxio::load_model(o->model, {.load_external_data = false});
    spdlog::debug("loaded {} ({} bytes of external data)", o->model, in.external_bytes);
    onnxio::SaveOptions save;
    using Mode = onnxio::SaveOptions::ExternalData;
    save.external_data = o->mode == "always" ? Mode::Always : o->mode == "never" ? Mode::Never : Mode::Auto;
    save.external_file = o->external_file;
    save.external_min_bytes = o->min_bytes;
    save.protect(in);
    onnxio::save_model(std::move(*in.proto), o->out, save);
    spdlog::info("wrote {}", o->out);
    return 0;
  };
}

}  // namespace qtool::cli
