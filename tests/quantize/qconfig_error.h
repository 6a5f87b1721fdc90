// The message QConfig::parse gives for a config text (what a user sees on stderr), for the QConfig tests.
#pragma once

#include <string>

#include "core/error.h"
#include "quantize/qconfig.h"

namespace qtool::quantize::qconfig_testing {

inline std::string error_of(const std::string& text) {
  try {
    QConfig::parse(text, "config.json");
  } catch (const BadInputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace qtool::quantize::qconfig_testing
