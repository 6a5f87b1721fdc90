// NumPy .npy reader and writer (format versions 1.0-3.0, see numpy/lib/format.py).
#include <algorithm>
#include <cstring>
#include <optional>

#include "core/file_io.h"
#include "tensorio/tensorio.h"

namespace qtool::tensorio {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// Parses the header: a Python dict literal with the keys 'descr', 'fortran_order' and 'shape'.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  NpyHeader parse() {
    NpyHeader h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      skip_ws();
      if (peek() == '}') break;
      const std::string key = parse_string();
      expect(':');
      skip_ws();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          fail("'descr' is a structured dtype; only simple numeric dtypes are supported", true);
        h.descr = parse_string();
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = parse_bool();
        have_order = true;
      } else if (key == "shape") {
        h.shape = parse_shape();
        have_shape = true;
      } else {
        fail("unexpected key '" + key + "'");
      }
      skip_ws();
      if (peek() == ',') ++pos_;
    }
    if (!have_descr || !have_order || !have_shape) fail("header dict lacks 'descr', 'fortran_order' or 'shape'");
    return h;
  }

 private:
  [[noreturn]] void fail(const std::string& why, bool unsupported = false) {
    const std::string msg = what_ + ": bad .npy header (" + why + ")";
    if (unsupported) throw UnsupportedError(msg);
    throw BadInputError(msg);
  }
  char peek() {
    if (pos_ >= s_.size()) fail("header dict ends early");
    return s_[pos_];
  }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n')) ++pos_;
  }
  void expect(char c) {
    skip_ws();
    if (peek() != c) fail(std::string("expected '") + c + "' at offset " + std::to_string(pos_));
    ++pos_;
  }
  std::string parse_string() {
    skip_ws();
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted key or string at offset " + std::to_string(pos_));
    const size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  bool parse_bool() {
    if (s_.substr(pos_, 4) == "True") {
      pos_ += 4;
      return true;
    }
    if (s_.substr(pos_, 5) == "False") {
      pos_ += 5;
      return false;
    }
    fail("'fortran_order' must be True or False");
  }
  Shape parse_shape() {
    expect('(');
    Shape shape;
    while (true) {
      skip_ws();
      if (peek() == ')') {
        ++pos_;
        return shape;
      }
      size_t start = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      if (start == pos_ || pos_ - start > 18) fail("'shape' must be a tuple of non-negative integers");
      shape.push_back(std::stoll(std::string(s_.substr(start, pos_ - start))));
      skip_ws();
      if (peek() == ',') ++pos_;
    }
  }

  std::string_view s_;
  const std::string& what_;
  size_t pos_ = 0;
};

// Table lookup: NumPy type string (without byte order) -> dtype.
std::optional<DType> dtype_from_descr(std::string_view kind_size) {
  for (int e = 0; e <= 32; ++e) {
    const DTypeInfo* d = dtype_info_or_null(e);
    if (d && !d->numpy_descr.empty() && d->numpy_descr.substr(1) == kind_size) return d->dtype;
  }
  return std::nullopt;
}

uint32_t read_le(const std::byte* p, int n) {
  uint32_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | std::to_integer<uint32_t>(p[i]);
  return v;
}

}  // namespace

Tensor parse_npy(std::span<const std::byte> b, const std::string& what) {
  if (b.size() < 10 || std::memcmp(b.data(), kMagic, 6) != 0)
    throw BadInputError(what + ": not a .npy file (bad magic; expected \\x93NUMPY)");
  const int major = std::to_integer<int>(b[6]);
  if (major < 1 || major > 3)
    throw UnsupportedError(what + ": .npy format version " + std::to_string(major) + " is not supported (1-3 are)");
  const size_t prefix = major == 1 ? 10 : 12;
  if (b.size() < prefix) throw BadInputError(what + ": truncated .npy header");
  const size_t hlen = read_le(b.data() + 8, major == 1 ? 2 : 4);
  if (b.size() < prefix + hlen)
    throw BadInputError(what + ": truncated .npy header (says " + std::to_string(hlen) + " bytes, file has " +
                        std::to_string(b.size() - prefix) + ")");
  const std::string_view text(reinterpret_cast<const char*>(b.data() + prefix), hlen);
  const NpyHeader h = HeaderParser(text, what).parse();

  const char order = h.descr.empty() ? '?' : h.descr[0];
  const std::string_view kind_size = (order == '<' || order == '>' || order == '|' || order == '=')
                                         ? std::string_view(h.descr).substr(1)
                                         : std::string_view(h.descr);
  const std::optional<DType> dt = dtype_from_descr(kind_size);
  if (!dt)
    throw UnsupportedError(what + ": NumPy dtype '" + h.descr +
                           "' is not supported (use float32/16/64, (u)int8/16/32/64 or bool)");
  const DType dtype = *dt;
  const size_t esize = static_cast<size_t>(dtype_info(dtype).bits / 8);
  // The shape's byte size, checked against --max-tensor-bytes before the product can overflow.
  uint64_t shape_bytes = esize;
  for (int64_t d : h.shape) {
    if (d < 0) throw BadInputError(what + ": negative dimension in shape " + shape_str(h.shape));
    if (d != 0 && shape_bytes > static_cast<uint64_t>(fileio::max_tensor_bytes()) / static_cast<uint64_t>(d))
      fileio::throw_over_limit(what + ": shape " + shape_str(h.shape), shape_bytes * static_cast<uint64_t>(d));
    shape_bytes *= static_cast<uint64_t>(d);
  }
  if (shape_bytes > static_cast<uint64_t>(fileio::max_tensor_bytes()))
    fileio::throw_over_limit(what + ": shape " + shape_str(h.shape), shape_bytes);
  const int64_t numel = shape_numel(h.shape);
  const size_t have = b.size() - prefix - hlen;
  const size_t need = static_cast<uint64_t>(numel) > have / esize ? have + 1 : static_cast<size_t>(numel) * esize;
  if (have < need)
    throw BadInputError(what + ": data is shorter than the shape " + shape_str(h.shape) + " needs (" +
                        std::to_string(have) + " bytes for " + std::to_string(numel) + " elements of " +
                        std::to_string(esize) + " bytes)");
  if (have > need)
    throw BadInputError(what + ": " + std::to_string(have - need) + " bytes of data beyond what shape " +
                        shape_str(h.shape) + " needs");
  Tensor t = Tensor::from_bytes(dtype, h.shape, b.subspan(prefix + hlen, need));
  if (order == '>' && esize > 1) {  // big-endian: swap each element
    std::byte* p = t.raw();
    for (int64_t i = 0; i < numel; ++i) std::reverse(p + i * esize, p + (i + 1) * esize);
  }
  if (h.fortran_order && h.shape.size() > 1) {  // column-major: element (i0..ik) is at sum(i_d * fstride_d)
    Tensor c(dtype, h.shape);
    const size_t rank = h.shape.size();
    std::vector<int64_t> fstride(rank), idx(rank, 0);
    int64_t s = 1;
    for (size_t d = 0; d < rank; ++d) {
      fstride[d] = s;
      s *= h.shape[d];
    }
    int64_t src = 0;
    for (int64_t i = 0; i < numel; ++i) {
      std::memcpy(c.raw() + i * esize, t.raw() + src * esize, esize);
      for (size_t d = rank; d-- > 0;) {  // advance the C-order index, tracking the Fortran offset
        if (++idx[d] < h.shape[d]) {
          src += fstride[d];
          break;
        }
        src -= (idx[d] - 1) * fstride[d];
        idx[d] = 0;
      }
    }
    t = c;
  }
  return t;
}

std::vector<std::byte> encode_npy(const Tensor& t) {
  const std::string_view descr = dtype_info(t.dtype()).numpy_descr;
  if (descr.empty())
    throw UnsupportedError("dtype " + std::string(dtype_name(t.dtype())) +
                           " has no NumPy equivalent; write it as an ONNX TensorProto (.pb) instead");
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i) shape += (i ? ", " : "") + std::to_string(t.shape()[i]);
  shape += t.shape().size() == 1 ? ",)" : ")";
  std::string header = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const bool v2 = header.size() + 11 > 65535;
  const size_t prefix = v2 ? 12 : 10;
  header += std::string((64 - (prefix + header.size() + 1) % 64) % 64, ' ') + "\n";
  std::vector<std::byte> out(prefix + header.size() + t.nbytes());
  std::memcpy(out.data(), kMagic, 6);
  out[6] = std::byte{static_cast<uint8_t>(v2 ? 2 : 1)};
  out[7] = std::byte{0};
  const uint32_t hl = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < prefix - 8; ++i) out[8 + i] = std::byte{static_cast<uint8_t>(hl >> (8 * i))};
  std::memcpy(out.data() + prefix, header.data(), header.size());
  if (t.nbytes()) std::memcpy(out.data() + prefix + header.size(), t.raw(), t.nbytes());
  return out;
}

Tensor read_npy(const std::filesystem::path& path) {
  return parse_npy(fileio::read_file_bytes(path, "tensor file"), path.string());
}

void write_npy(const std::filesystem::path& path, const Tensor& t) {
  try {
    fileio::write_file_atomic(path, encode_npy(t));
  } catch (const UnsupportedError& e) {
    throw UnsupportedError(path.string() + ": " + e.what());
  }
}

}  // namespace qtool::tensorio
