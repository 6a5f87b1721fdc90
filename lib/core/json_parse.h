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

inline nlohmann::json parse_json_limited(const std::string& text, const std::string& source) {
  using json = nlohmann::json;
  // Where the parser stands, for messages: one frame per open object or array.
  struct Frame {
    bool array = false;
    std::string key;
    int64_t index = 0;  // arrays: elements completed
  };
  std::vector<Frame> stack;
  auto path = [&] {
    std::string p = "$";
    for (const Frame& f : stack) {
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
  };
  auto element_done = [&] {
    if (!stack.empty() && stack.back().array) ++stack.back().index;
  };
  const json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (depth > kMaxJsonDepth)
          throw BadInputError(source + ": JSON nested more than " + std::to_string(kMaxJsonDepth) +
                              " levels deep; not a qtool file");
        stack.push_back({event == json::parse_event_t::array_start, {}, 0});
        break;
      case json::parse_event_t::key: stack.back().key = parsed.get<std::string>(); break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack.pop_back();
        element_done();
        break;
      case json::parse_event_t::value: element_done(); break;
    }
    return true;
  };
  try {
    return json::parse(text, cb);
  } catch (const json::out_of_range& e) {  // 406: number overflow
    std::string what = e.what();
    const size_t cut = what.find("] ");
    if (cut != std::string::npos) what = what.substr(cut + 2);
    throw BadInputError(source + ": " + path() + ": " + what + " (outside the range of a double)");
  } catch (const json::parse_error& e) {
    throw BadInputError(source + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
  } catch (const json::exception& e) {
    throw BadInputError(source + ": not valid JSON (" + std::string(e.what()) + ")");
  }
}

}  // namespace qtool
