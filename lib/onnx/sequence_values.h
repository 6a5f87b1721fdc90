// Which values of a model hold sequences of tensors (ONNX seq(tensor(T))) rather than tensors.
//
// The quantizer reads the ONNX graph, not the interpreter's values, and a Q/DQ pair on a sequence makes a model ONNX
// Runtime refuses to load. A value is a sequence when the model declares it one (graph input, output or value_info
// of type seq(...)), when an op that makes sequences produces it (SequenceEmpty, SequenceConstruct, SequenceInsert,
// SequenceErase, SplitToSequence, SequenceMap), or when one is passed on: by Identity, by If (either branch returns a
// sequence there) and by Loop (a carried value that is one going in or coming out of the body); a Loop body's
// carried input is a sequence when the Loop's is. Bodies of If/Loop/Scan/SequenceMap are searched too.
#pragma once

#include <set>
#include <string>

namespace onnx {
class GraphProto;
}  // namespace onnx

namespace qtool::onnxio {

// The names of sequence values in g and every body under it (names, not scopes: a name that some graph of the
// hierarchy makes a sequence is in the set).
std::set<std::string> sequence_values(const onnx::GraphProto& g);

}  // namespace qtool::onnxio
