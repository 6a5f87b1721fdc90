// `qtool run` end to end: outputs written as .npy with sanitised names, numbers, exit codes and
// messages for bad inputs, --repeat statistics and --json.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model_builder.h"
#include "onnx/model_io.h"
#include "tensorio/tensorio.h"
#include "test_paths.h"

namespace fs = std::filesystem;
using qtool::DType;
using qtool::Tensor;

namespace {

struct Result {
  int rc;
  std::string out, err;
};

Result qtool_run(const std::string& args, const fs::path& dir) {
  const fs::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  const std::string cmd =
      qtool::test::qtool_exe().string() + " run " + args + " > " + out.string() + " 2> " + err.string();
  const int status = std::system(cmd.c_str());
  auto slurp = [](const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  return {WEXITSTATUS(status), slurp(out), slurp(err)};
}

// y = Sigmoid(x) + b, and "out/shape:0" = Shape(x).
fs::path write_model(const fs::path& dir) {
  qtool::test::ModelBuilder b(13);
  b.input("x", DType::Float32, {-1, 4});
  b.initializer("b", Tensor::from_vector<float>({4}, {0.f, 1.f, 2.f, 3.f}));
  b.node("Sigmoid", {"x"}, {"s"});
  b.node("Add", {"s", "b"}, {"y"});
  b.node("Shape", {"x"}, {"out/shape:0"});
  b.output("y");
  b.output("out/shape:0", DType::Int64);
  const fs::path p = dir / "m.onnx";
  qtool::onnxio::save_model(b.model, p);
  return p;
}

}  // namespace

TEST_CASE("qtool run writes every output as .npy with sanitised names") {
  const fs::path dir = qtool::test::scratch_dir("cli_run");
  const fs::path model = write_model(dir);
  const Tensor x = Tensor::from_vector<float>({2, 4}, {0.f, 1.f, -1.f, 2.f, 3.f, -3.f, 0.5f, -0.5f});
  qtool::tensorio::write_npy(dir / "x.npy", x);
  const Result r = qtool_run(model.string() + " --input x=" + (dir / "x.npy").string() + " --output-dir " +
                                 (dir / "out").string() + " --threads 2",
                             dir);
  INFO(r.err);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("y  float [2,4]") && Catch::Contains("time:"));
  const Tensor y = qtool::tensorio::read_npy(dir / "out" / "y.npy");
  REQUIRE(y.shape() == qtool::Shape{2, 4});
  for (int i = 0; i < 8; ++i)
    CHECK(y.data<float>()[i] == Approx(1.0 / (1.0 + std::exp(-x.data<float>()[i])) + (i % 4)).epsilon(1e-6));
  const Tensor s = qtool::tensorio::read_npy(dir / "out" / "out_shape_0.npy");
  CHECK(std::vector<int64_t>(s.data<int64_t>(), s.data<int64_t>() + 2) == std::vector<int64_t>{2, 4});
}

TEST_CASE("qtool run reports bad inputs by name with exit code 2") {
  const fs::path dir = qtool::test::scratch_dir("cli_run_errors");
  const fs::path model = write_model(dir);
  qtool::tensorio::write_npy(dir / "x.npy", Tensor::from_vector<float>({1, 4}, {1, 2, 3, 4}));
  qtool::tensorio::write_npy(dir / "x3.npy", Tensor::from_vector<float>({1, 3}, {1, 2, 3}));
  qtool::tensorio::write_npy(dir / "xi.npy", Tensor::from_vector<int64_t>({1, 4}, {1, 2, 3, 4}));
  const std::string m = model.string();
  Result r = qtool_run(m, dir);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Catch::Contains("missing input 'x' (float [N,4])"));
  r = qtool_run(m + " --input X=" + (dir / "x.npy").string(), dir);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Catch::Contains("unknown input 'X'") && Catch::Contains("'x'"));
  r = qtool_run(m + " --input x=" + (dir / "x3.npy").string(), dir);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Catch::Contains("input 'x' has shape [1,3]") && Catch::Contains("dimension 1 must be 4"));
  r = qtool_run(m + " --input x=" + (dir / "xi.npy").string(), dir);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Catch::Contains("input 'x' has dtype int64"));
  r = qtool_run(m + " --input x=" + (dir / "absent.npy").string(), dir);
  CHECK(r.rc == 2);
  CHECK_THAT(r.err, Catch::Contains("absent.npy"));
  r = qtool_run(m + " --input " + (dir / "x.npy").string(), dir);
  CHECK(r.rc == 1);
  CHECK_THAT(r.err, Catch::Contains("expected NAME=FILE"));
}

TEST_CASE("qtool run --repeat prints latency statistics, --json one object") {
  const fs::path dir = qtool::test::scratch_dir("cli_run_repeat");
  const fs::path model = write_model(dir);
  qtool::tensorio::write_npy(dir / "x.npy", Tensor::from_vector<float>({1, 4}, {1, 2, 3, 4}));
  Result r = qtool_run(model.string() + " --input x=" + (dir / "x.npy").string() + " --repeat 5", dir);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("latency over 5 runs after warm-up: median"));
  r = qtool_run(model.string() + " --input x=" + (dir / "x.npy").string() + " --repeat 3 --json", dir);
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["repeat"] == 3);
  CHECK(j["min_ms"].get<double>() <= j["median_ms"].get<double>());
  CHECK(j["median_ms"].get<double>() <= j["max_ms"].get<double>());
  CHECK(j["outputs"][1]["name"] == "out/shape:0");
  CHECK(j["outputs"][1]["dtype"] == "int64");
  r = qtool_run(model.string() + " --input x=" + (dir / "x.npy").string() + " --profile", dir);
  REQUIRE(r.rc == 0);
  CHECK_THAT(r.out, Catch::Contains("time per op type") && Catch::Contains("Sigmoid") && Catch::Contains("Shape"));
}
