#include "calib/calibration_data.h"

#include <algorithm>
#include <cstring>
#include <random>

#include "calib/random_inputs.h"
#include "core/error.h"
#include "tensorio/tensorio.h"

namespace qtool::calib {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------------
// Tensor plumbing.

namespace {

size_t element_bytes(DType t) {
  const DTypeInfo& info = dtype_info(t);
  if (info.cls == DTypeClass::String || info.elems_per_byte != 1)
    throw UnsupportedError(std::string("calibration inputs of dtype ") + std::string(info.name) + " are not supported");
  return static_cast<size_t>(info.bits / 8);
}

int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

}  // namespace

Tensor slice_axis(const Tensor& t, int64_t axis, int64_t first, int64_t count) {
  const Shape& s = t.shape();
  const auto a = static_cast<size_t>(axis);
  if (a >= s.size() || first < 0 || count < 0 || first + count > s[a])
    throw InternalError("slice_axis: [" + std::to_string(first) + ", +" + std::to_string(count) + ") of axis " +
                        std::to_string(axis) + " of " + shape_str(s));
  Shape out_shape = s;
  out_shape[a] = count;
  Tensor out(t.dtype(), out_shape);
  const size_t inner = static_cast<size_t>(prod(s, a + 1, s.size())) * element_bytes(t.dtype());
  const int64_t outer = prod(s, 0, a);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out.raw() + static_cast<size_t>(o * count) * inner,
                t.raw() + static_cast<size_t>(o * s[a] + first) * inner, static_cast<size_t>(count) * inner);
  return out;
}

Tensor concat_axis(const std::vector<Tensor>& parts, int64_t axis) {
  if (parts.empty()) throw InternalError("concat_axis: no parts");
  if (parts.size() == 1) return parts.front();
  const auto a = static_cast<size_t>(axis);
  Shape out_shape = parts.front().shape();
  if (axis < 0 || a >= out_shape.size())
    throw InternalError("concat_axis: axis " + std::to_string(axis) + " of " + shape_str(out_shape));
  out_shape[a] = 0;
  for (const Tensor& p : parts) {
    Shape check = p.shape();
    if (check.size() != out_shape.size() || p.dtype() != parts.front().dtype())
      throw InternalError("concat_axis: parts of different rank or dtype");
    out_shape[a] += check[a];
    check[a] = out_shape[a];
    if (check != out_shape) throw InternalError("concat_axis: parts differ outside the axis");
  }
  Tensor out(parts.front().dtype(), out_shape);
  const size_t inner = static_cast<size_t>(prod(out_shape, a + 1, out_shape.size())) * element_bytes(out.dtype());
  const int64_t outer = prod(out_shape, 0, a);
  size_t offset = 0;  // rows of the axis already written
  for (const Tensor& p : parts) {
    const auto rows = static_cast<size_t>(p.shape()[a]);
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out.raw() + (static_cast<size_t>(o) * static_cast<size_t>(out_shape[a]) + offset) * inner,
                  p.raw() + static_cast<size_t>(o) * rows * inner, rows * inner);
    offset += rows;
  }
  return out;
}

std::vector<std::map<std::string, Tensor>> first_samples(SampleSource& source, int64_t max) {
  std::vector<std::map<std::string, Tensor>> out;
  for (int64_t i = 0; i < std::min(max, source.samples()); ++i) out.push_back(source.batch(i, 1));
  return out;
}

// ---------------------------------------------------------------------------------------------------
// Validation shared by the file sources.

namespace {

// Checks one input value read from `origin` against the model's declaration; a value one rank short gets a
// batch axis of 1. Returns the (possibly reshaped) tensor.
Tensor checked(const InputSpec& in, Tensor t, const std::string& origin) {
  if (in.dtype != DType::Undefined && t.dtype() != in.dtype)
    throw BadInputError(origin + ": input '" + in.name + "' is " + std::string(dtype_name(t.dtype())) +
                        ", the model wants " + in.declared);
  if (!in.dims) return t;
  const size_t rank = in.dims->size();
  if (t.shape().size() + 1 == rank) {
    Shape s = t.shape();
    s.insert(s.begin() + in.batch_axis, 1);
    t = t.reshaped(s);
  }
  if (t.shape().size() != rank)
    throw BadInputError(origin + ": input '" + in.name + "' has shape " + shape_str(t.shape()) + ", the model wants " +
                        in.declared + " (rank " + std::to_string(rank) + ", samples along axis " +
                        std::to_string(in.batch_axis) + ")");
  for (size_t i = 0; i < rank; ++i) {
    const auto& d = (*in.dims)[i];
    if (static_cast<int64_t>(i) == in.batch_axis || !d) continue;
    if (t.shape()[i] != *d)
      throw BadInputError(origin + ": input '" + in.name + "' has shape " + shape_str(t.shape()) +
                          ", the model wants " + in.declared + " (dim " + std::to_string(i) + " is " +
                          std::to_string(t.shape()[i]) + ", expected " + std::to_string(*d) + ")");
  }
  return t;
}

std::string input_list(const std::vector<InputSpec>& inputs) {
  std::string s;
  for (const InputSpec& in : inputs) s += (s.empty() ? "" : ", ") + in.name;
  return s;
}

std::string samples_text(int64_t n) { return std::to_string(n) + (n == 1 ? " sample" : " samples"); }

const InputSpec* find_input(const std::vector<InputSpec>& inputs, const std::string& name) {
  for (const InputSpec& in : inputs)
    if (in.name == name) return &in;
  return nullptr;
}

// An input declared as a scalar (rank 0, e.g. Silero VAD's sample rate `sr`) has no axis to stack samples along: a
// batch passes one value, so every sample in it must hold the same value.
bool scalar_input(const InputSpec& in) { return in.dims && in.dims->empty(); }

Tensor one_value_for_batch(const InputSpec& in, const std::vector<Tensor>& values, const std::string& origin) {
  for (const Tensor& v : values)
    if (!v.same_as(values.front()))
      throw BadInputError(origin + ": input '" + in.name + "' is a scalar (" + in.declared +
                          ") and differs between the samples of one batch; use --batch-size 1");
  return values.front();
}

// ---------------------------------------------------------------------------------------------------

class ArrayFiles final : public SampleSource {
 public:
  ArrayFiles(const std::vector<InputSpec>& inputs, const std::map<std::string, fs::path>& files) : inputs_(inputs) {
    for (const auto& [name, path] : files)
      if (!find_input(inputs, name))
        throw BadInputError("--data " + name + "=" + path.string() + ": the model has no input '" + name +
                            "' (its inputs: " + input_list(inputs) + ")");
    for (const InputSpec& in : inputs) {
      auto it = files.find(in.name);
      if (it == files.end())
        throw BadInputError("no data for input '" + in.name + "': add --data " + in.name +
                            "=FILE.npy (the model's inputs: " + input_list(inputs) + ")");
      Tensor t = tensorio::read_tensor_file(it->second);
      if (scalar_input(in) && t.rank() <= 1) {  // one value for every sample, or one per sample: stored as [n]
        if (in.dtype != DType::Undefined && t.dtype() != in.dtype)
          throw BadInputError(it->second.string() + ": input '" + in.name + "' is " +
                              std::string(dtype_name(t.dtype())) + ", the model wants " + in.declared);
        if (t.rank() == 0) t = t.reshaped({1});
      } else {
        t = checked(in, std::move(t), it->second.string());
      }
      if (!in.dims && t.rank() == 0)
        throw BadInputError(it->second.string() + ": input '" + in.name + "' is a scalar: it has no batch axis");
      const int64_t rows = t.dim(in.batch_axis);
      if (rows < 1) throw BadInputError(it->second.string() + ": input '" + in.name + "' holds no sample");
      samples_ = std::max(samples_, rows);
      values_.emplace(in.name, std::move(t));
      files_ += (files_.empty() ? "" : ", ") + it->second.filename().string();
    }
    for (const InputSpec& in : inputs) {
      const int64_t rows = values_.at(in.name).dim(in.batch_axis);
      if (rows != 1 && rows != samples_)
        throw BadInputError(files.at(in.name).string() + ": input '" + in.name + "' holds " + std::to_string(rows) +
                            " samples, other inputs " + std::to_string(samples_) +
                            " (give each input the same number of samples, or 1 to reuse it for all)");
    }
  }
  int64_t samples() const override { return samples_; }
  std::string describe() const override { return samples_text(samples_) + " from " + files_; }
  std::map<std::string, Tensor> batch(int64_t first, int64_t count) override {
    std::map<std::string, Tensor> out;
    for (const InputSpec& in : inputs_) {
      const Tensor& t = values_.at(in.name);
      if (scalar_input(in)) {  // [n] values: this batch's, as one scalar
        std::vector<Tensor> values;
        for (int64_t i = first; i < first + count; ++i) values.push_back(slice_axis(t, 0, t.dim(0) == 1 ? 0 : i, 1).reshaped({}));
        out.emplace(in.name, one_value_for_batch(in, values, files_));
      } else if (t.dim(in.batch_axis) == 1 && samples_ > 1)
        out.emplace(in.name, concat_axis(std::vector<Tensor>(static_cast<size_t>(count), t), in.batch_axis));
      else
        out.emplace(in.name, slice_axis(t, in.batch_axis, first, count));
    }
    return out;
  }

 private:
  std::vector<InputSpec> inputs_;
  std::map<std::string, Tensor> values_;
  int64_t samples_ = 0;
  std::string files_;
};

// ---------------------------------------------------------------------------------------------------

class DataDir final : public SampleSource {
 public:
  DataDir(const std::vector<InputSpec>& inputs, const fs::path& dir) : inputs_(inputs), dir_(dir) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      const std::string name = e.path().filename().string();
      if (e.is_directory() && name.rfind("test_data_set_", 0) == 0)
        entries_.push_back(e.path());
      else if (e.is_regular_file() && e.path().extension() == ".npz")
        entries_.push_back(e.path());
    }
    if (ec) throw BadInputError("cannot list data folder " + dir.string() + ": " + ec.message());
    if (entries_.empty())
      throw BadInputError("data folder " + dir.string() +
                          " holds no test_data_set_* folders and no .npz files: put one .npz per sample there "
                          "(keys = input names), or use --data NAME=FILE.npy");
    std::sort(entries_.begin(), entries_.end());
  }
  int64_t samples() const override { return static_cast<int64_t>(entries_.size()); }
  std::string describe() const override { return std::to_string(entries_.size()) + " samples from " + dir_.string(); }
  std::map<std::string, Tensor> batch(int64_t first, int64_t count) override {
    std::map<std::string, std::vector<Tensor>> parts;
    for (int64_t i = first; i < first + count; ++i)
      for (auto& [name, t] : load(entries_[static_cast<size_t>(i)])) parts[name].push_back(std::move(t));
    std::map<std::string, Tensor> out;
    for (const InputSpec& in : inputs_)
      out.emplace(in.name, scalar_input(in) ? one_value_for_batch(in, parts.at(in.name), dir_.string())
                                            : concat_axis(parts.at(in.name), in.batch_axis));
    return out;
  }

 private:
  std::map<std::string, Tensor> load(const fs::path& entry) const {
    std::map<std::string, Tensor> raw;
    if (fs::is_directory(entry)) {
      // input_<i>.pb, in numeric order; matched by the proto's name, else by position. Also <input name>.npy, named
      // like the model's input.
      std::vector<std::pair<int, fs::path>> pbs;
      for (const auto& e : fs::directory_iterator(entry)) {
        const std::string n = e.path().filename().string(), ext = e.path().extension().string();
        if (const InputSpec* in = find_input(inputs_, e.path().stem().string());
            in && ext == ".npy" && !raw.count(in->name)) {
          raw[in->name] = tensorio::read_tensor_file(e.path());
          continue;
        }
        if (n.rfind("input_", 0) == 0 && ext == ".pb") pbs.emplace_back(std::atoi(n.c_str() + 6), e.path());
      }
      std::sort(pbs.begin(), pbs.end());
      for (size_t k = 0; k < pbs.size(); ++k) {
        std::string name;
        Tensor t = tensorio::read_pb(pbs[k].second, &name);
        if (!find_input(inputs_, name)) {
          if (k >= inputs_.size())
            throw BadInputError(pbs[k].second.string() + ": the model has only " + std::to_string(inputs_.size()) +
                                " inputs (" + input_list(inputs_) + ")");
          name = inputs_[k].name;
        }
        raw[name] = std::move(t);
      }
    } else {
      raw = tensorio::read_npz(entry);
      for (const auto& [name, t] : raw)
        if (!find_input(inputs_, name))
          throw BadInputError(entry.string() + ": key '" + name +
                              "' is not an input of the model (its inputs: " + input_list(inputs_) + ")");
    }
    std::map<std::string, Tensor> out;
    for (const InputSpec& in : inputs_) {
      auto it = raw.find(in.name);
      if (it == raw.end())
        throw BadInputError(entry.string() + ": no value for input '" + in.name + "'" +
                            (fs::is_directory(entry) ? ": put it there as input_<i>.pb (i = its position, " +
                                                           std::to_string(&in - inputs_.data()) + ") or as " +
                                                           in.name + ".npy"
                                                     : ""));
      out.emplace(in.name, checked(in, std::move(it->second), entry.string()));
    }
    return out;
  }

  std::vector<InputSpec> inputs_;
  fs::path dir_;
  std::vector<fs::path> entries_;
};

// ---------------------------------------------------------------------------------------------------

// Element j of an integer or bool tensor set to v (token ids can pass 2^24, where float stores would round).
void store_int(Tensor& t, int64_t j, int64_t v) {
  switch (t.dtype()) {
    case DType::Int64:
      t.data<int64_t>()[j] = v;
      break;
    case DType::Int32:
      t.data<int32_t>()[j] = static_cast<int32_t>(v);
      break;
    case DType::UInt32:
      t.data<uint32_t>()[j] = static_cast<uint32_t>(v);
      break;
    case DType::UInt64:
      t.data<uint64_t>()[j] = static_cast<uint64_t>(v);
      break;
    default:
      dtype_info(t.dtype()).store(t.raw(), j, static_cast<float>(v), true);
  }
}

class RandomSource final : public SampleSource {
 public:
  RandomSource(const std::vector<InputSpec>& inputs, int64_t samples, uint64_t seed, RandomPlan plan)
      : inputs_(inputs), samples_(samples), seed_(seed), plan_(std::move(plan)) {
    if (samples < 1) throw UsageError("--random needs at least 1 sample");
  }
  int64_t samples() const override { return samples_; }
  std::string describe() const override {
    return samples_text(samples_) + " (random, seed " + std::to_string(seed_) + ")";
  }
  std::vector<std::string> details() const override { return plan_.details; }
  std::map<std::string, Tensor> batch(int64_t first, int64_t count) override {
    std::map<std::string, Tensor> out;
    for (size_t k = 0; k < inputs_.size(); ++k) {
      const InputSpec& in = inputs_[k];
      std::vector<Tensor> parts;
      for (int64_t i = first; i < first + count; ++i) parts.push_back(sample(k, i));
      out.emplace(in.name, concat_axis(parts, in.batch_axis));
    }
    return out;
  }

 private:
  // Sample i of input k. Each has its own generator: values do not depend on the batching.
  Tensor sample(size_t k, int64_t i) const {
    const InputSpec& in = inputs_[k];
    const RandomInputPlan& p = plan_.inputs.at(in.name);
    std::seed_seq seq{static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32), static_cast<uint32_t>(k),
                      static_cast<uint32_t>(i), static_cast<uint32_t>(static_cast<uint64_t>(i) >> 32)};
    if (p.fill == RandomFill::Normal || (p.fill == RandomFill::Ones && is_float(in.dtype))) {
      Tensor t(DType::Float32, p.shape);
      if (p.fill == RandomFill::Ones) {
        std::fill(t.span<float>().begin(), t.span<float>().end(), 1.0f);
      } else {
        std::mt19937 rng(seq);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (float& v : t.span<float>()) v = nd(rng);
      }
      if (in.dtype == DType::Float32) return t;
      Tensor narrow(in.dtype, t.shape());  // float16 / bfloat16 / float64 inputs: the same values, rounded
      const auto store = dtype_info(in.dtype).store;
      for (int64_t j = 0; j < t.numel(); ++j) store(narrow.raw(), j, t.data<float>()[j], true);
      return narrow;
    }
    Tensor t(in.dtype, p.shape);
    std::mt19937_64 rng(seq);  // its output is fixed by the standard, unlike the distributions'
    int64_t inner = 1;         // Positions: elements per step along the axis
    for (size_t a = static_cast<size_t>(p.axis) + 1; a < p.shape.size(); ++a) inner *= p.shape[a];
    for (int64_t j = 0; j < t.numel(); ++j) {
      int64_t v = 0;
      switch (p.fill) {
        case RandomFill::TokenIds:
          v = static_cast<int64_t>(rng() % static_cast<uint64_t>(p.bound));
          break;
        case RandomFill::Ones:
          v = 1;
          break;
        case RandomFill::Positions:
          v = p.offset + (p.shape.empty() ? 0 : (j / inner) % p.shape[static_cast<size_t>(p.axis)]);
          break;
        case RandomFill::Branch:
          v = i % 2;
          break;
        case RandomFill::Zeros:
        case RandomFill::Normal:
          break;
      }
      store_int(t, j, v);
    }
    return t;
  }

  std::vector<InputSpec> inputs_;
  int64_t samples_;
  uint64_t seed_;
  RandomPlan plan_;
};

}  // namespace

std::unique_ptr<SampleSource> open_array_files(const std::vector<InputSpec>& inputs,
                                               const std::map<std::string, fs::path>& files) {
  return std::make_unique<ArrayFiles>(inputs, files);
}

std::unique_ptr<SampleSource> open_data_dir(const std::vector<InputSpec>& inputs, const fs::path& dir) {
  return std::make_unique<DataDir>(inputs, dir);
}

std::unique_ptr<SampleSource> open_random(const std::vector<InputSpec>& inputs, int64_t samples, uint64_t seed,
                                          const std::map<std::string, Shape>& shapes, const onnx::ModelProto* model) {
  if (samples < 1) throw UsageError("--random needs at least 1 sample");
  return std::make_unique<RandomSource>(inputs, samples, seed, plan_random_inputs(inputs, shapes, model));
}

}  // namespace qtool::calib
