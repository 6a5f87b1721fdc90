// What `--random N` feeds each model input (calib/calibration_data.h open_random), read from the graph.
//
// Float inputs get standard normal values, as they always did. Integer and bool inputs cannot take any value:
// token ids index an embedding, so a value past its rows is out of bounds. Each such input is followed through
// value-preserving ops (Cast, Reshape, Unsqueeze, Squeeze, Flatten, Identity, Expand, Transpose, Slice, Tile,
// Concat, Split, and Gather/GatherElements as data) to its readers, If/Loop/Scan bodies included:
//   - read as indices (Gather, GatherElements, GatherND, com.microsoft EmbedLayerNormalization): token ids,
//     uniform in [0, V) with V the smallest size of the indexed axis over all those readers. A reader whose table
//     size is not known from the model (not an initializer or Constant, no fixed dims declared) makes the input
//     an error, never a guess;
//   - an attention mask (its name holds "mask", it is a mask slot of a contrib attention op, or it is cast to
//     float and multiplied / subtracted, or used as a Where condition / negated): ones;
//   - position ids (name holds "position"): past + 0, 1, ..., T-1 along the sequence axis;
//   - token type / segment ids (name holds "token_type" or "segment"): zeros;
//   - a bool If condition (Optimum's use_cache_branch): false on even samples, true on odd, so both branches run;
//   - anything else: UnsupportedError (exit 2) naming the input and `--data`.
// A float input whose name holds "mask" gets ones as well.
//
// Shapes: the batch axis is 1 per sample (as before). A symbolic dim takes its value from, in order: --shape
// SYMBOL=N, a --shape INPUT=d0,d1,... that fixes it on some input, the past length of key/value cache inputs
// (float inputs named "past..." or "...cache...": 0, the first step of generation), the sequence length of the
// token inputs (ids, positions, type ids: T = 64, lowered to fit the positional tables: the rows a position input
// or a Range indexes, the axis of a constant table sliced by a computed end), and for a mask with a symbol of its
// own the total length past + T. Any other open dim is an error asking for --shape, as before.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "calib/calibration_data.h"

namespace onnx {
class ModelProto;
}

namespace qtool::calib {

enum class RandomFill {
  Normal,     // standard normal (float inputs)
  TokenIds,   // uniform integers in [0, bound)
  Ones,       // attention masks
  Positions,  // offset + index along `axis`
  Zeros,      // token type / segment ids
  Branch,     // a bool If condition: sample i is (i odd)
};

struct RandomInputPlan {
  RandomFill fill = RandomFill::Normal;
  Shape shape;         // one sample: 1 on the batch axis
  int64_t bound = 0;   // TokenIds: values in [0, bound)
  int64_t offset = 0;  // Positions: the first position (the past length)
  int64_t axis = 0;    // Positions: the axis the positions count along
};

struct RandomPlan {
  std::map<std::string, RandomInputPlan> inputs;
  std::vector<std::string> details;  // what was chosen and why, one line each (`-v`)
};

// The default sequence length for token inputs, before the positional tables lower it.
constexpr int64_t kDefaultRandomSequence = 64;

// `shapes`: --shape entries, keyed by input name (the whole shape) or by a dim symbol (one value). `model` may be
// null (no graph to read: integer and bool inputs are errors). Errors: UsageError for a --shape that names neither
// an input nor a symbol or has the wrong rank, or a dim nothing sets; UnsupportedError for an input whose values
// cannot be derived.
RandomPlan plan_random_inputs(const std::vector<InputSpec>& inputs, const std::map<std::string, Shape>& shapes,
                              const onnx::ModelProto* model);

}  // namespace qtool::calib
