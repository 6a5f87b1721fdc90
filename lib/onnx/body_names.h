// Giving every tensor defined inside an If/Loop/Scan body a name no other graph of the model defines.
//
// ONNX asks for each name to be defined once across a graph and its bodies, but exporters reuse them: Hugging Face
// Optimum's merged decoder puts the no-past and the with-past decoder, exported from one torch module and so naming
// their tensors alike ('/blocks.0/attn/MatMul_output_0'), in the two branches of an If, and names each branch's
// outputs as the If's own ('logits'). Calibration and quantization key activations by name, so a name with two
// definitions would mix two tensors' values (qtool then kept such tensors float: in a merged decoder, nearly all).
// scope_body_names renames, in each body, every name the body defines (formal inputs, initializers, node outputs)
// that some other graph of the model also defines, to "<node>/<attribute>/<name>" (made unique with a suffix
// where needed), and rewrites the body's and its nested bodies' references to it. The main graph's names, the
// model's inputs and outputs, and names defined once stay as they are; the model computes the same outputs; a
// second call renames nothing. qtool calibrate and qtool quantize both apply it, so their tables agree.
#pragma once

#include <map>
#include <string>

namespace onnx {
class ModelProto;
class GraphProto;
}  // namespace onnx

namespace qtool::onnxio {

// How many graphs of the hierarchy under g (g and its If/Loop/Scan bodies, recursively) define each name, as a formal
// input, an initializer or a node output; each graph counts once.
std::map<std::string, int> definition_counts(const onnx::GraphProto& g);

// Whether some name is defined in more than one graph of the model (what scope_body_names renames, if a body
// defines it).
bool body_names_clash(const onnx::ModelProto& model);
// Returns the number of definitions renamed.
int scope_body_names(onnx::ModelProto& model);

}  // namespace qtool::onnxio
