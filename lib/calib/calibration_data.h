// Where calibration samples come from, and how they are cut into batches.
//
// A sample source serves the model's inputs for samples [first, first + count), stacked along each input's
// batch axis. Three kinds:
//   - array files, one per input (`--data NAME=FILE.npy|.npz|.pb`): the array has the input's rank and holds
//     its samples along the batch axis ([6,224,224,3] = six samples of [N,224,224,3]). An input with a single
//     sample is reused for every sample (e.g. an RNN's zero state).
//   - a folder (`--data DIR`) of `test_data_set_*` folders (input_<i>.pb, matched to inputs by the proto's
//     name, else by position) or of `.npz` files (keys = input names), one sample each, read when its batch is.
//   - random (`--random N [--seed S] [--shape NAME=d0,d1,...|SYMBOL=N]`): values and shapes that the graph says
//     are valid (calib/random_inputs.h: standard normal floats, token ids below the embedding's rows, masks of
//     ones, positions, the symbolic sequence and past lengths), sample i drawn from its own seeded generator, so
//     batches do not change the values.
// The batch axis of an input is 0, unless its declared dim 0 is fixed and another axis carries the symbolic
// batch dimension of the other inputs (silero VAD: state [2, batch, 128] has batch axis 1).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace onnx {
class ModelProto;
}

namespace qtool::calib {

// A model input as calibration needs to know it.
struct InputSpec {
  std::string name;
  DType dtype = DType::Float32;
  std::optional<std::vector<std::optional<int64_t>>> dims;  // nullopt rank = unknown; nullopt dim = symbolic
  std::vector<std::string> symbols;                         // per dim: its symbolic name, "" if none
  int64_t batch_axis = 0;
  std::string declared;  // the declared type for messages, e.g. "float [N,224,224,3]"
};

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int64_t samples() const = 0;
  // One value per input, samples [first, first + count) stacked along the batch axis.
  virtual std::map<std::string, Tensor> batch(int64_t first, int64_t count) = 0;
  // "6 samples from mobilenetv2_calib6.npy" for the summary.
  virtual std::string describe() const = 0;
  // How the samples were made, one line each, for `-v` (random samples: each input's values and each dim chosen).
  virtual std::vector<std::string> details() const { return {}; }
};

std::unique_ptr<SampleSource> open_array_files(const std::vector<InputSpec>& inputs,
                                               const std::map<std::string, std::filesystem::path>& files);
std::unique_ptr<SampleSource> open_data_dir(const std::vector<InputSpec>& inputs, const std::filesystem::path& dir);
// `shapes`: --shape by input name or dim symbol. `model`: the graph that says which values its integer inputs may
// take (calib/random_inputs.h); null: float inputs only.
std::unique_ptr<SampleSource> open_random(const std::vector<InputSpec>& inputs, int64_t samples, uint64_t seed,
                                          const std::map<std::string, Shape>& shapes,
                                          const onnx::ModelProto* model = nullptr);

// The first min(max, source.samples()) samples, one run's inputs each, for callers that keep them in memory (the
// accuracy guard of `qtool quantize`, `qtool inspect --against`).
std::vector<std::map<std::string, Tensor>> first_samples(SampleSource& source, int64_t max);

// Tensor plumbing used by the sources (exposed for tests).
Tensor slice_axis(const Tensor& t, int64_t axis, int64_t first, int64_t count);
Tensor concat_axis(const std::vector<Tensor>& parts, int64_t axis);

}  // namespace qtool::calib
