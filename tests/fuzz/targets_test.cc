// The libFuzzer target bodies (fuzz/targets.h, docs/fuzzing.md) in the ordinary test build, so CI compiles and
// runs them without clang or libFuzzer: each accepts a valid input of its format and refuses a broken one with
// the library's typed bad-input error (what the CLI turns into exit 2 and one line). An input that crashes a
// target in a fuzzing run becomes a file under tests/fuzz/ and a CHECK here, through the same body.
#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/error.h"
#include "core/tensor.h"
#include "targets.h"
#include "tensorio/tensorio.h"
#include "test_paths.h"

using namespace qtool;
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  REQUIRE(f);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

// The kind of the typed error `body` throws on `bytes`, or nothing when it accepts them.
std::optional<ErrorKind> outcome(void (*body)(std::string_view), const std::string& bytes) {
  try {
    body(bytes);
  } catch (const Error& e) {
    UNSCOPED_INFO(e.what());
    return e.kind();
  }
  return std::nullopt;
}

bool refused_as_bad_input(void (*body)(std::string_view), const std::string& bytes) {
  const auto kind = outcome(body, bytes);
  return kind == ErrorKind::BadInput || kind == ErrorKind::Unsupported;
}

// models/tiny_external.onnx in the model target's layout: its external data renamed to the target's data.bin.
std::string model_input(bool cut_data) {
  onnx::ModelProto m;
  REQUIRE(m.ParseFromString(read_all(test::source_dir() / "models" / "tiny_external.onnx")));
  for (onnx::TensorProto& t : *m.mutable_graph()->mutable_initializer())
    for (auto& entry : *t.mutable_external_data())
      if (entry.key() == "location") entry.set_value("data.bin");
  const std::string proto = m.SerializeAsString();
  std::string data = read_all(test::source_dir() / "models" / "tiny_external.data");
  if (cut_data) data.resize(data.size() - 100);
  const auto n = static_cast<uint32_t>(proto.size());
  std::string len(4, '\0');
  std::memcpy(len.data(), &n, 4);
  return proto + data + len;
}

}  // namespace

TEST_CASE("fuzz: each target body accepts a valid input and refuses a truncated one with a typed error") {
  const fs::path src = test::source_dir();
  struct Case {
    const char* target;
    void (*body)(std::string_view);
    std::string valid;
  };
  const fs::path scratch = test::scratch_dir("fuzz_bodies");
  tensorio::write_npz(scratch / "one.npz", {{"x", tensorio::read_npy(src / "tests/tensorio/data/f32_2x3.npy")}});
  const Case cases[] = {
      {"model", fuzz::model, model_input(false)},
      {"qconfig", fuzz::qconfig, read_all(src / "configs/int8.json")},
      {"calib_table", fuzz::calib_table, read_all(src / "tests/fuzz/calib_table_minmax.json")},
      {"npy", fuzz::npy, read_all(src / "tests/tensorio/data/f32_2x3.npy")},
      {"npz", fuzz::npz, read_all(scratch / "one.npz")},
      {"pb", fuzz::pb, read_all(src / "tests/tensorio/data/input_0.pb")},
  };
  for (const Case& c : cases) {
    INFO(c.target);
    CHECK(outcome(c.body, c.valid) == std::nullopt);
    CHECK(refused_as_bad_input(c.body, c.valid.substr(0, c.valid.size() / 2)));
  }
  // External data shorter than the model's offsets and lengths say.
  CHECK(refused_as_bad_input(fuzz::model, model_input(true)));
}
