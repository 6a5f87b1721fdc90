// Parsing untrusted JSON (QConfig files, calibration tables) with limits. Header-only: the modules that read
// JSON link nlohmann_json themselves; lib/core does not.
//
//  - nesting deeper than kMaxJsonDepth is a BadInputError (10,000 levels of [[[...]]] would otherwise
//    recurse through every later walk of the document);
//  - a number outside double's range (1e400) is a BadInputError naming the JSON path where it stands;
//  - syntax errors are BadInputErrors with nlohmann's byte position.
// Every message starts with `source` (the file name).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"

namespace qtool {

inline constexpr int kMaxJsonDepth = 64;

// nlohmann's DOM builder with the depth limit and a record of where it stands (for messages). A SAX handler, not
// json::parse with a callback: with any callback, nlohmann scans the whole enclosing object after each nested
// object closes (to drop discarded values), so a calibration table of 16,000 tensors took 30 % of `quantize
// --calib` in that scan alone (quadratic in the number of tensors).
class LimitedJsonSax : public nlohmann::detail::json_sax_dom_parser<nlohmann::json> {
  using Base = nlohmann::detail::json_sax_dom_parser<nlohmann::json>;
  using json = nlohmann::json;

 public:
  LimitedJsonSax(json& root, const std::string& source) : Base(root, true), source_(source) {}

  // Where the parser stands: "$.tensors.x[3]".
  std::string path() const {
    std::string p = "$";
    for (const Frame& f : stack_) {
      // Built with append: GCC 12 warns falsely (-Wrestrict, bug 105329) on "literal" + std::string&&.
      if (f.array) {
        p.append("[").append(std::to_string(f.index)).append("]");
      } else if (!f.key.empty()) {
        if (f.key.find_first_of(".[]\" ") == std::string::npos)
          p.append(".").append(f.key);
        else
          p.append("[").append(json(f.key).dump()).append("]");
      }
    }
    return p;
  }

  bool start_object(std::size_t n) { return open(false) && Base::start_object(n); }
  bool start_array(std::size_t n) { return open(true) && Base::start_array(n); }
  bool end_object() { return close() && Base::end_object(); }
  bool end_array() { return close() && Base::end_array(); }
  bool key(std::string& k) {
    stack_.back().key = k;
    return Base::key(k);
  }
  bool null() { return done() && Base::null(); }
  bool boolean(bool v) { return done() && Base::boolean(v); }
  bool number_integer(json::number_integer_t v) { return done() && Base::number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return done() && Base::number_unsigned(v); }
  bool number_float(json::number_float_t v, const std::string& s) { return done() && Base::number_float(v, s); }
  bool string(std::string& v) { return done() && Base::string(v); }

 private:
  struct Frame {
    bool array = false;
    std::string key;
    int64_t index = 0;  // arrays: elements completed
  };
  bool open(bool array) {
    if (static_cast<int>(stack_.size()) > kMaxJsonDepth)
      throw BadInputError(source_ + ": JSON nested more than " + std::to_string(kMaxJsonDepth) +
                          " levels deep; not a qtool file");
    stack_.push_back({array, {}, 0});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return done();
  }
  bool done() {  // a value is complete: the enclosing array's next element starts
    if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
    return true;
  }

  std::string source_;
  std::vector<Frame> stack_;
};

inline nlohmann::json parse_json_limited(const std::string& text, const std::string& source) {
  using json = nlohmann::json;
  json result;
  LimitedJsonSax sax(result, source);
  try {
    json::sax_parse(text, &sax);
    return result;
  } catch (const json::out_of_range& e) {  // 406: number overflow
    std::string what = e.what();
    const size_t cut = what.find("] ");
    if (cut != std::string::npos) what = what.substr(cut + 2);
    throw BadInputError(source + ": " + sax.path() + ": " + what + " (outside the range of a double)");
  } catch (const json::parse_error& e) {
    throw BadInputError(source + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception& e) {
    throw BadInputError(source + ": not valid JSON (" + std::string(e.what()) + ")");
  }
}

}  // namespace qtool
