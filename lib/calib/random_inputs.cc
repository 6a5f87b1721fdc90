#include "calib/random_inputs.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <set>

#include "core/error.h"
#include "onnx/model_walk.h"
#include "onnx/tensor_proto.h"

namespace qtool::calib {

namespace {

using Dims = std::vector<std::optional<int64_t>>;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool has(const std::string& name, const char* part) { return lower(name).find(part) != std::string::npos; }

std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) {
    if (i) s += ',';
    s += d[i] ? std::to_string(*d[i]) : std::string("?");
  }
  return s + "]";
}

// The model's graphs (subgraphs included) as name -> readers, producer, constant and declared shape. A body
// reads outer values by name, so one index over all graphs follows a value into If/Loop/Scan bodies.
class GraphIndex {
 public:
  struct Use {
    const onnx::NodeProto* node;
    int index;
  };

  explicit GraphIndex(const onnx::ModelProto& model) {
    for (const auto& o : model.opset_import())
      if (o.domain().empty() || o.domain() == "ai.onnx") opset_ = o.version();
    onnxio::for_each_graph(model, [&](const onnx::GraphProto& g, int) {
      for (const auto& t : g.initializer()) consts_[t.name()] = &t;
      for (const auto* list : {&g.input(), &g.output(), &g.value_info()})
        for (const auto& vi : *list) declare(vi);
      for (const auto& n : g.node()) {
        for (int i = 0; i < n.input_size(); ++i)
          if (!n.input(i).empty()) uses_[n.input(i)].push_back({&n, i});
        for (const auto& out : n.output())
          if (!out.empty()) producer_[out] = &n;
        if (n.op_type() == "Constant" && n.output_size() == 1)
          for (const auto& a : n.attribute())
            if (a.name() == "value" && a.has_t()) consts_[n.output(0)] = &a.t();
        all_.push_back(&n);
      }
    });
  }

  const std::vector<Use>& uses(const std::string& name) const {
    static const std::vector<Use> none;
    auto it = uses_.find(name);
    return it == uses_.end() ? none : it->second;
  }
  const std::vector<const onnx::NodeProto*>& nodes() const { return all_; }
  int64_t opset() const { return opset_; }
  bool is_const(const std::string& name) const { return consts_.count(name) > 0; }

  // The shape of `name`: a constant's dims, through shape-preserving producers, or the declared type.
  std::optional<Dims> dims(const std::string& name, int depth = 0) const {
    if (auto c = consts_.find(name); c != consts_.end()) {
      Dims d;
      for (int64_t v : c->second->dims()) d.push_back(v);
      return d;
    }
    if (auto p = producer_.find(name); p != producer_.end() && depth < 16) {
      const onnx::NodeProto& n = *p->second;
      if ((n.op_type() == "Cast" || n.op_type() == "Identity" || n.op_type() == "DequantizeLinear") &&
          n.input_size() >= 1)
        if (auto d = dims(n.input(0), depth + 1)) return d;
    }
    if (auto d = declared_.find(name); d != declared_.end()) return d->second;
    return std::nullopt;
  }

  // The values of a small integer constant (Slice axes), when stored inline.
  std::optional<std::vector<int64_t>> ints(const std::string& name) const {
    auto c = consts_.find(name);
    if (c == consts_.end() || onnxio::proto_numel(*c->second) > 64) return std::nullopt;
    try {
      const Tensor t = onnxio::tensor_from_proto(*c->second, name);
      if (!is_integer(t.dtype())) return std::nullopt;
      std::vector<int64_t> v;
      const auto load = dtype_info(t.dtype()).load;
      for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<int64_t>(load(t.raw(), i)));
      return v;
    } catch (const Error&) {
      return std::nullopt;
    }
  }

 private:
  void declare(const onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
    Dims d;
    for (const auto& dim : vi.type().tensor_type().shape().dim())
      d.push_back(dim.has_dim_value() ? std::optional<int64_t>(dim.dim_value()) : std::nullopt);
    declared_.emplace(vi.name(), std::move(d));
  }

  int64_t opset_ = 1;
  std::map<std::string, std::vector<Use>> uses_;
  std::map<std::string, const onnx::NodeProto*> producer_;
  std::map<std::string, const onnx::TensorProto*> consts_;
  std::map<std::string, Dims> declared_;
  std::vector<const onnx::NodeProto*> all_;
};

bool onnx_domain(const onnx::NodeProto& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }
bool ms_domain(const onnx::NodeProto& n) { return n.domain() == "com.microsoft"; }

int64_t int_attr(const onnx::NodeProto& n, const char* name, int64_t dflt) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return dflt;
}

// "Gather '/emb/Gather'", or for an unnamed node "Gather (output 'e')".
std::string node_label(const onnx::NodeProto& n) {
  if (!n.name().empty() || n.output_size() == 0) return n.op_type() + " '" + n.name() + "'";
  return n.op_type() + " (output '" + n.output(0) + "')";
}

// What the readers of one value (through value-preserving ops) do with it.
struct Reach {
  bool indexed = false;          // some reader uses it as indices
  std::optional<int64_t> bound;  // the smallest indexed size among those readers
  std::string bound_why;         // "Gather 'g' indexes 'emb' [512,64]"
  std::string unknown;           // a reader whose indexed size is not known (the input is then an error)
  bool mask = false;             // cast to float and multiplied/subtracted, a Where condition, negated
  bool contrib_mask = false, position_slot = false, segment_slot = false;
  bool if_condition = false;
};

// Ops whose output holds (a subset or a rearrangement of) the values of input `index`.
bool forwards(const onnx::NodeProto& n, int index) {
  if (!onnx_domain(n)) return false;
  static const std::set<std::string> any_input = {"Cast", "Identity", "Concat", "Flatten", "Transpose"};
  static const std::set<std::string> first_input = {"Reshape", "Unsqueeze", "Squeeze",  "Expand", "Slice",
                                                    "Tile",    "Split",     "CastLike", "Gather", "GatherElements"};
  return any_input.count(n.op_type()) || (index == 0 && first_input.count(n.op_type()));
}

bool float_type(int64_t onnx_dtype) {
  const DTypeInfo* info = dtype_info_or_null(static_cast<int32_t>(onnx_dtype));
  return info && info->cls == DTypeClass::Float;
}

class Walker {
 public:
  explicit Walker(const GraphIndex& g) : g_(g) {}

  // What the readers of these values do with them (one walk: each tensor is visited once).
  Reach walk(const std::vector<std::string>& names) {
    Reach r;
    std::set<std::string> seen;
    for (const std::string& name : names) visit(name, false, r, seen, 0);
    return r;
  }

 private:
  // A reader indexes `table` along `count` axes from `first` (-1: to the last): the smallest bounds the values.
  void indexed(Reach& r, const onnx::NodeProto& n, const std::string& table, int64_t first, int64_t count) {
    r.indexed = true;
    const auto d = g_.dims(table);
    std::optional<int64_t> size;
    if (d) {
      const auto rank = static_cast<int64_t>(d->size());
      if (first < 0) first += rank;
      const int64_t last = count < 0 ? rank : first + count;
      for (int64_t a = first; a >= 0 && a < std::min(last, rank); ++a) {
        const auto& v = (*d)[static_cast<size_t>(a)];
        if (!v) {
          size.reset();
          break;
        }
        size = size ? std::min(*size, *v) : *v;
      }
    }
    if (!size) {
      if (r.unknown.empty()) {
        r.unknown = node_label(n) + " reads it as indices of '" + table + "'";
        if (d) {
          r.unknown += ' ';
          r.unknown += dims_str(*d);
        }
        r.unknown += ", whose size the model does not fix";
      }
      return;
    }
    if (!r.bound || *size < *r.bound) {
      r.bound = size;
      r.bound_why = node_label(n) + " indexes '" + table + "' " + dims_str(*d);
    }
  }

  void visit(const std::string& name, bool as_float, Reach& r, std::set<std::string>& seen, int depth) {
    if (depth > 64 || !seen.insert(name + (as_float ? "/f" : "")).second) return;
    for (const GraphIndex::Use& u : g_.uses(name)) {
      const onnx::NodeProto& n = *u.node;
      const std::string& op = n.op_type();
      if (onnx_domain(n) && (op == "Gather" || op == "GatherElements") && u.index == 1) {
        indexed(r, n, n.input(0), int_attr(n, "axis", 0), 1);
      } else if (onnx_domain(n) && op == "GatherND" && u.index == 1) {
        indexed(r, n, n.input(0), int_attr(n, "batch_dims", 0), -1);
      } else if (ms_domain(n) && op == "EmbedLayerNormalization") {
        if (u.index == 0 && n.input_size() > 2) indexed(r, n, n.input(2), 0, 1);
        if (u.index == 1) r.segment_slot = true;
        if (u.index == 1 && n.input_size() > 4) indexed(r, n, n.input(4), 0, 1);
        if (u.index == 7) r.contrib_mask = true;
        if (u.index == 8) r.position_slot = true;
        if (u.index == 8 && n.input_size() > 3) indexed(r, n, n.input(3), 0, 1);
      } else if (ms_domain(n) &&
                 ((op == "Attention" && u.index == 3) || (op == "MultiHeadAttention" && u.index == 4))) {
        r.contrib_mask = true;
      } else if (onnx_domain(n) && op == "If" && u.index == 0) {
        r.if_condition = true;
      } else if (onnx_domain(n) && ((op == "Where" && u.index == 0) || op == "Not")) {
        r.mask = true;
      } else if (onnx_domain(n) && as_float && (op == "Mul" || op == "Sub")) {
        r.mask = true;
      } else if (forwards(n, u.index)) {
        const bool to_float = op == "Cast" ? float_type(int_attr(n, "to", 0)) : as_float;
        for (const auto& out : n.output())
          if (!out.empty()) visit(out, to_float, r, seen, depth + 1);
      }
    }
  }

  const GraphIndex& g_;
};

// Tables a sequence must fit: T + past <= bound. The rows a Range indexes (positions computed in the graph) and
// the axis of a constant sliced by a computed end (llama2.c's RoPE tables and causal mask, BERT's position_ids
// buffer).
std::vector<std::pair<int64_t, std::string>> positional_tables(const GraphIndex& g) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::vector<std::string> ranges;
  for (const onnx::NodeProto* n : g.nodes()) {
    if (!onnx_domain(*n)) continue;
    if (n->op_type() == "Range" && n->output_size() == 1) ranges.push_back(n->output(0));
    if (n->op_type() == "Slice" && g.opset() >= 10 && n->input_size() >= 3 && g.is_const(n->input(0)) &&
        !g.is_const(n->input(2))) {
      const auto d = g.dims(n->input(0));
      if (!d || d->empty()) continue;
      std::vector<int64_t> axes = {0};
      if (n->input_size() >= 4 && !n->input(3).empty()) {
        const auto a = g.ints(n->input(3));
        if (!a) continue;
        axes = *a;
      }
      for (int64_t a : axes) {
        if (a < 0) a += static_cast<int64_t>(d->size());
        if (a < 0 || a >= static_cast<int64_t>(d->size()) || !(*d)[static_cast<size_t>(a)]) continue;
        out.emplace_back(*(*d)[static_cast<size_t>(a)],
                         node_label(*n) + " cuts '" + n->input(0) + "' " + dims_str(*d) + " to it");
      }
    }
  }
  const Reach r = Walker(g).walk(ranges);
  if (r.bound) out.emplace_back(*r.bound, r.bound_why + " with a Range");
  return out;
}

enum class Role { Float, FloatMask, Cache, TokenIds, Mask, Positions, Zeros, Branch };

bool token_role(Role r) { return r == Role::TokenIds || r == Role::Positions || r == Role::Zeros; }
bool mask_role(Role r) { return r == Role::Mask || r == Role::FloatMask; }

struct Classified {
  Role role = Role::Float;
  int64_t bound = 0;  // TokenIds: values below; Positions: positions below (0 = no table)
  std::string why;
};

Classified classify(const InputSpec& in, Walker* walker) {
  const std::string& name = in.name;
  if (is_float(in.dtype)) {
    if (has(name, "mask")) return {Role::FloatMask, 0, "a float mask (its name): ones"};
    if (has(name, "past") || has(name, "cache")) return {Role::Cache, 0, "key/value cache (its name)"};
    return {Role::Float, 0, "standard normal"};
  }
  const std::string data_hint = "; give its values with --data " + name + "=FILE.npy";
  const std::string what = "--random cannot fill input '" + name + "' (" + in.declared + "): ";
  const DTypeClass cls = in.dtype == DType::Undefined ? DTypeClass::None : dtype_info(in.dtype).cls;
  if (cls != DTypeClass::Integer && cls != DTypeClass::Bool)
    throw UnsupportedError(what + "random values are made for float, integer and bool inputs only" + data_hint);
  if (!walker)
    throw UnsupportedError(what + "an integer input needs the model's graph to find its valid range" + data_hint);
  const Reach r = walker->walk({name});
  const int64_t dtype_max = dtype_info(in.dtype).qmax;
  if (has(name, "token_type") || has(name, "segment") || r.segment_slot)
    return {Role::Zeros, 0, "token type / segment ids: zeros"};
  if (has(name, "position") || r.position_slot) {
    if (!r.unknown.empty()) throw UnsupportedError(what + r.unknown + data_hint);
    return {Role::Positions, r.bound.value_or(0),
            "position ids: 0, 1, ... along the sequence" + (r.bound ? " (" + r.bound_why + ")" : std::string())};
  }
  if (has(name, "mask") || r.contrib_mask || (r.mask && !r.indexed)) return {Role::Mask, 0, "attention mask: ones"};
  if (r.indexed) {
    if (!r.unknown.empty()) throw UnsupportedError(what + r.unknown + data_hint);
    if (*r.bound < 1) throw UnsupportedError(what + r.bound_why + ", which is empty" + data_hint);
    const int64_t bound = dtype_max < *r.bound ? dtype_max + 1 : *r.bound;  // uint8 ids of a 512-row table: 256
    return {Role::TokenIds, bound, "token ids uniform in [0, " + std::to_string(bound) + "): " + r.bound_why};
  }
  if (cls == DTypeClass::Bool && r.if_condition)
    return {Role::Branch, 0, "If condition: false on even samples, true on odd (both branches run)"};
  throw UnsupportedError(what +
                         "nothing reads it as indices of a table of known size, so no range is sure to be "
                         "valid" +
                         data_hint);
}

// Terms of a symbol like "past_sequence_length + 1" (Optimum's exports), when every term is known.
std::optional<int64_t> symbol_sum(const std::string& symbol, const std::map<std::string, int64_t>& values) {
  if (symbol.find('+') == std::string::npos) return std::nullopt;
  int64_t sum = 0;
  size_t pos = 0;
  while (pos <= symbol.size()) {
    const size_t plus = std::min(symbol.find('+', pos), symbol.size());
    std::string term = symbol.substr(pos, plus - pos);
    term.erase(0, term.find_first_not_of(' '));
    term.erase(term.find_last_not_of(' ') + 1);
    int64_t v = 0;
    if (auto it = values.find(term); it != values.end())
      v = it->second;
    else if (!term.empty() && term.size() <= 9 && term.find_first_not_of("0123456789") == std::string::npos)
      v = std::stoll(term);
    else
      return std::nullopt;
    constexpr int64_t kMax = int64_t{1} << 40;  // far past any length; keeps the sum from overflowing
    if (v > kMax || sum + v > kMax) return std::nullopt;
    sum += v;
    pos = plus + 1;
  }
  return sum;
}

}  // namespace

RandomPlan plan_random_inputs(const std::vector<InputSpec>& inputs, const std::map<std::string, Shape>& shapes,
                              const onnx::ModelProto* model) {
  std::optional<GraphIndex> index;
  std::optional<Walker> walker;
  if (model) {
    index.emplace(*model);
    walker.emplace(*index);
  }
  std::string input_list, symbol_list;
  std::set<std::string> symbols;
  for (const InputSpec& in : inputs) {
    input_list += (input_list.empty() ? "" : ", ") + in.name;
    for (const std::string& s : in.symbols)
      if (!s.empty() && symbols.insert(s).second) symbol_list += (symbol_list.empty() ? "" : ", ") + s;
  }
  auto find_input = [&](const std::string& name) -> const InputSpec* {
    for (const InputSpec& in : inputs)
      if (in.name == name) return &in;
    return nullptr;
  };

  // A symbolic dim's key: its symbol, or "<input>#<axis>" for an anonymous one.
  auto dim_key = [](const InputSpec& in, size_t a) {
    return a < in.symbols.size() && !in.symbols[a].empty() ? in.symbols[a] : in.name + "#" + std::to_string(a);
  };
  // Dim values by symbol, and where each came from (for -v).
  std::map<std::string, int64_t> value;
  std::map<std::string, std::string> origin;
  auto set = [&](const std::string& symbol, int64_t v, const std::string& why) {
    if (symbol.empty() || value.count(symbol)) return;
    value[symbol] = v;
    origin[symbol] = why;
  };
  for (const auto& [name, s] : shapes) {
    if (find_input(name)) continue;
    if (!symbols.count(name))
      throw BadInputError("--shape " + name + ": the model has no input and no dim named '" + name +
                          "' (inputs: " + input_list + (symbol_list.empty() ? "" : "; dims: " + symbol_list) + ")");
    if (s.size() != 1)
      throw UsageError("--shape " + name + "=" + shape_str(s) + ": a dim takes one value (--shape " + name + "=N)");
    set(name, s[0], "--shape");
  }
  for (const InputSpec& in : inputs) {
    auto it = shapes.find(in.name);
    if (it == shapes.end()) continue;
    if (in.dims && it->second.size() != in.dims->size())
      throw UsageError("--shape " + in.name + "=" + shape_str(it->second) + " has rank " +
                       std::to_string(it->second.size()) + ", the model wants " + in.declared);
    for (size_t a = 0; in.dims && a < it->second.size(); ++a)
      if (static_cast<int64_t>(a) != in.batch_axis && !(*in.dims)[a])
        set(dim_key(in, a), it->second[a], "--shape " + in.name);
  }
  for (const InputSpec& in : inputs)  // the batch: one sample
    if (static_cast<size_t>(in.batch_axis) < in.symbols.size()) set(in.symbols[in.batch_axis], 1, "the batch");

  std::vector<Classified> roles;
  for (const InputSpec& in : inputs) roles.push_back(classify(in, walker ? &*walker : nullptr));

  // The symbolic non-batch dims of input k: (axis, key).
  auto symbolic_dims = [&](size_t k) {
    std::vector<std::pair<size_t, std::string>> out;
    const InputSpec& in = inputs[k];
    for (size_t a = 0; in.dims && a < in.dims->size(); ++a)
      if (!(*in.dims)[a] && static_cast<int64_t>(a) != in.batch_axis) out.emplace_back(a, dim_key(in, a));
    return out;
  };
  std::set<std::string> token_symbols;  // the sequence dims of token ids, positions and type ids
  for (size_t k = 0; k < inputs.size(); ++k)
    if (token_role(roles[k].role))
      for (const auto& [a, s] : symbolic_dims(k)) token_symbols.insert(s);

  // Key/value caches: the one symbolic dim of each that is not the sequence is the past length, 0 unless --shape
  // sets it: the first step of generation, where every key and value the model computes is its own.
  int64_t past_len = 0;
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (roles[k].role != Role::Cache) continue;
    std::vector<std::string> past;
    for (const auto& [a, s] : symbolic_dims(k))
      if (!token_symbols.count(s)) past.push_back(s);
    if (past.size() != 1) continue;  // none, or several: --shape decides
    set(past[0], 0, "key/value cache length: 0, the first step of generation");
    past_len = std::max(past_len, value[past[0]]);
  }

  // The sequence length: the default, lowered to fit every positional table (positions past .. past + T - 1).
  int64_t seq = kDefaultRandomSequence;
  std::string seq_why = "default " + std::to_string(kDefaultRandomSequence);
  std::vector<std::pair<int64_t, std::string>> tables;
  if (index) tables = positional_tables(*index);
  for (size_t k = 0; k < inputs.size(); ++k)
    if (roles[k].role == Role::Positions && roles[k].bound > 0)
      tables.emplace_back(roles[k].bound, "position ids of input '" + inputs[k].name + "'");
  const std::pair<int64_t, std::string>* tightest = nullptr;
  for (const auto& t : tables)
    if (!tightest || t.first < tightest->first) tightest = &t;
  if (tightest) {
    seq = std::clamp<int64_t>(tightest->first - past_len, 1, seq);
    seq_why += ", within " + std::to_string(tightest->first) + (past_len ? " - " + std::to_string(past_len) : "") +
               ": " + tightest->second;
  }
  for (const std::string& s : token_symbols) set(s, seq, "sequence length (" + seq_why + ")");
  if (!token_symbols.empty()) seq = value[*token_symbols.begin()];  // as --shape may have set it
  // Masks: a dim of their own is the total length, past + sequence (or the sum the symbol spells out).
  for (size_t k = 0; k < inputs.size(); ++k)
    if (mask_role(roles[k].role))
      for (const auto& [a, s] : symbolic_dims(k)) {
        if (value.count(s)) continue;
        if (auto sum = symbol_sum(s, value))
          set(s, *sum, "the sum its name spells");
        else
          set(s, past_len + seq,
              "mask length: past " + std::to_string(past_len) + " + sequence " + std::to_string(seq));
      }

  RandomPlan plan;
  for (const auto& [s, v] : value)
    if (s.find('#') == std::string::npos && origin[s] != "the batch")
      plan.details.push_back("--random: dim '" + s + "' = " + std::to_string(v) + " (" + origin[s] + ")" +
                             (origin[s].rfind("--shape", 0) == 0 ? "" : "; set it with --shape " + s + "=N"));
  for (size_t k = 0; k < inputs.size(); ++k) {
    const InputSpec& in = inputs[k];
    RandomInputPlan p;
    if (auto it = shapes.find(in.name); it != shapes.end()) {
      p.shape = it->second;
    } else {
      if (!in.dims) throw UsageError("input '" + in.name + "' has no declared shape: give it with --shape");
      for (size_t a = 0; a < in.dims->size(); ++a) {
        const auto& d = (*in.dims)[a];
        const std::string s = dim_key(in, a);
        if (d) {
          p.shape.push_back(*d);
        } else if (static_cast<int64_t>(a) == in.batch_axis) {
          p.shape.push_back(1);
        } else if (auto v = value.find(s); v != value.end()) {
          p.shape.push_back(v->second);
        } else {
          throw UsageError("input '" + in.name + "' is " + in.declared + ": give its shape with --shape " + in.name +
                           "=d0,d1,..." +
                           (s.find('#') == std::string::npos ? " or the dim with --shape " + s + "=N" : ""));
        }
      }
    }
    if (static_cast<int64_t>(p.shape.size()) <= in.batch_axis)  // a scalar: no axis to stack samples along
      throw BadInputError(
          "--random: input '" + in.name + "' is " + in.declared +
          ", which has no batch axis to stack random samples along; declare it with a batch axis ([1])");
    p.shape[static_cast<size_t>(in.batch_axis)] = 1;  // one sample
    const Classified& c = roles[k];
    switch (c.role) {
      case Role::Float:
      case Role::Cache:
        p.fill = RandomFill::Normal;
        break;
      case Role::FloatMask:
      case Role::Mask:
        p.fill = RandomFill::Ones;
        break;
      case Role::TokenIds:
        p.fill = RandomFill::TokenIds;
        break;
      case Role::Zeros:
        p.fill = RandomFill::Zeros;
        break;
      case Role::Branch:
        p.fill = RandomFill::Branch;
        break;
      case Role::Positions: {
        p.fill = RandomFill::Positions;
        p.offset = past_len;
        p.axis = static_cast<int64_t>(p.shape.size()) - 1;
        for (size_t a = 0; a < in.symbols.size(); ++a)
          if (token_symbols.count(in.symbols[a])) p.axis = static_cast<int64_t>(a);
        const int64_t last = p.offset + (p.shape.empty() ? 1 : p.shape[static_cast<size_t>(p.axis)]);
        if (c.bound > 0 && last > c.bound)
          throw UsageError("--random: input '" + in.name + "' would hold positions up to " + std::to_string(last - 1) +
                           ", but its table has " + std::to_string(c.bound) + " rows: give a shorter --shape");
        break;
      }
    }
    p.bound = c.bound;
    plan.details.push_back("--random: input '" + in.name + "' (" + in.declared + ") " + shape_str(p.shape) + ": " +
                           c.why);
    plan.inputs.emplace(in.name, std::move(p));
  }
  return plan;
}

}  // namespace qtool::calib
