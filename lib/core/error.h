// Typed errors thrown by the library. The CLI catches them in one place (apps/qtool/main.cc)
// and maps each kind to a documented exit code. No code in lib/ calls exit().
#pragma once

#include <stdexcept>
#include <string>

namespace qtool {

enum class ErrorKind {
  Usage,        // the caller asked for something meaningless (bad flag combination)      -> exit 1
  BadInput,     // a file, model, config or tensor the user gave is wrong or unreadable  -> exit 2
  Unsupported,  // valid input that qtool does not handle (an op, a dtype)               -> exit 2
  Internal,     // a bug in qtool                                                         -> exit 3
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

struct UsageError : Error {
  explicit UsageError(const std::string& m) : Error(ErrorKind::Usage, m) {}
};
struct BadInputError : Error {
  explicit BadInputError(const std::string& m) : Error(ErrorKind::BadInput, m) {}
};
struct UnsupportedError : Error {
  explicit UnsupportedError(const std::string& m) : Error(ErrorKind::Unsupported, m) {}
};
struct InternalError : Error {
  explicit InternalError(const std::string& m) : Error(ErrorKind::Internal, m) {}
};

// Exit codes documented in the README and in `qtool --help`.
constexpr int kExitOk = 0;
constexpr int kExitUsage = 1;
constexpr int kExitBadInput = 2;
constexpr int kExitInternal = 3;
// qtool quantize: the accuracy guard could not bring every output to its threshold (nothing written unless
// --allow-below-target).
constexpr int kExitBelowTarget = 4;

inline int exit_code_for(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::Usage: return kExitUsage;
    case ErrorKind::BadInput:
    case ErrorKind::Unsupported: return kExitBadInput;
    case ErrorKind::Internal: return kExitInternal;
  }
  return kExitInternal;
}

}  // namespace qtool
