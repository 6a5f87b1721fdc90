// lib/onnx validation at load (onnx/validate.h): corrupt tensors, names and nodes are BadInputErrors naming the
// tensor or node; every shared and bundled model passes.
#include "onnx/validate.h"

#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "onnx/model_io.h"
#include "test_paths.h"

// GCC 12 warns falsely (-Wrestrict, bug 105329) inside protobuf's generated setters called with literals.
#pragma GCC diagnostic ignored "-Wrestrict"

using namespace qtool;
using namespace qtool::onnxio;
namespace fs = std::filesystem;

namespace {

// x[1,2] -> Add(x, W) -> y, W float [2] in raw_data.
onnx::ModelProto add_model() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* w = g->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->set_raw_data(std::string(8, '\0'));
  auto* n = g->add_node();
  n->set_name("add");
  n->set_op_type("Add");
  n->add_input("x");
  n->add_input("W");
  n->add_output("y");
  g->add_input()->set_name("x");
  g->add_output()->set_name("y");
  return m;
}

// The message validate_model throws, or "" when it accepts the model.
std::string rejection(const onnx::ModelProto& m) {
  try {
    validate_model(m, "model 'm.onnx': ");
  } catch (const BadInputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("validate: a well-formed model passes") { CHECK(rejection(add_model()).empty()); }

TEST_CASE("validate: tensor data that disagrees with dims is rejected, naming tensor and model") {
  auto m = add_model();
  auto* w = m.mutable_graph()->mutable_initializer(0);
  SECTION("raw_data too short") {
    w->set_raw_data(std::string(3, '\0'));
    CHECK_THAT(rejection(m), Catch::Contains("model 'm.onnx': initializer 'W': raw_data holds 3 bytes") &&
                                 Catch::Contains("need 8"));
  }
  SECTION("typed field too long") {
    w->clear_raw_data();
    for (int i = 0; i < 3; ++i) w->add_float_data(1.f);
    CHECK_THAT(rejection(m), Catch::Contains("float_data holds 3 values") && Catch::Contains("need 2"));
  }
  SECTION("no data at all") {
    w->clear_raw_data();
    CHECK_THAT(rejection(m), Catch::Contains("float_data holds 0 values"));
  }
  SECTION("negative dimension") {
    w->set_dims(0, -2);
    CHECK_THAT(rejection(m), Catch::Contains("initializer 'W': negative dimension in shape [-2]"));
  }
  SECTION("element count overflows int64") {
    w->set_dims(0, int64_t{1} << 40);
    w->add_dims(int64_t{1} << 40);
    CHECK_THAT(rejection(m), Catch::Contains("more elements than a 64-bit count"));
  }
  SECTION("byte count overflows int64") {
    w->set_dims(0, int64_t{1} << 62);
    CHECK_THAT(rejection(m), Catch::Contains("overflow a 64-bit byte count"));
  }
  SECTION("data_type 0 and unknown") {
    w->set_data_type(0);
    CHECK_THAT(rejection(m), Catch::Contains("initializer 'W': data_type 0 (UNDEFINED)"));
    w->set_data_type(99);
    CHECK_THAT(rejection(m), Catch::Contains("data_type 99 is not an ONNX data type"));
  }
  SECTION("a Constant node's tensor is checked too") {
    auto* c = m.mutable_graph()->add_node();
    c->set_name("k");
    c->set_op_type("Constant");
    c->add_output("k_out");
    auto* a = c->add_attribute();
    a->set_name("value");
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::INT64);
    a->mutable_t()->add_dims(4);
    a->mutable_t()->add_int64_data(1);
    CHECK_THAT(rejection(m), Catch::Contains("node 'k' (Constant) attribute 'value': int64_data holds 1 values"));
  }
}

TEST_CASE("validate: duplicate and empty initializer names") {
  auto m = add_model();
  *m.mutable_graph()->add_initializer() = m.graph().initializer(0);
  CHECK_THAT(rejection(m), Catch::Contains("initializer 'W' in graph 'g' is defined twice"));
  m.mutable_graph()->mutable_initializer(1)->set_name("");
  CHECK_THAT(rejection(m), Catch::Contains("has an empty name"));
}

TEST_CASE("validate: malformed sparse initializers are named as such") {
  auto m = add_model();
  auto* s = m.mutable_graph()->add_sparse_initializer();
  s->add_dims(4);
  auto* v = s->mutable_values();
  v->set_name("S");
  v->set_data_type(onnx::TensorProto::FLOAT);
  v->add_dims(2);
  v->add_float_data(1.f);
  v->add_float_data(2.f);
  auto* ix = s->mutable_indices();
  ix->set_data_type(onnx::TensorProto::INT64);
  ix->add_dims(2);
  ix->add_int64_data(0);
  ix->add_int64_data(3);
  CHECK(rejection(m).empty());
  ix->set_int64_data(1, 4);  // outside the dense shape [4]
  CHECK_THAT(rejection(m), Catch::Contains("sparse initializer 'S'") && Catch::Contains("sparse index 4 lies outside"));
  ix->set_int64_data(1, 3);
  ix->add_dims(2);  // [2,2]: coordinates for a rank-2 dense shape, but it has rank 1
  ix->add_int64_data(0);
  ix->add_int64_data(1);
  CHECK_THAT(rejection(m), Catch::Contains("sparse initializer 'S'") && Catch::Contains("sparse indices have shape [2,2]"));
}

TEST_CASE("validate: nodes missing required inputs or outputs name node and op") {
  auto m = add_model();
  auto* n = m.mutable_graph()->mutable_node(0);
  SECTION("too few inputs") {
    n->mutable_input()->RemoveLast();
    CHECK_THAT(rejection(m), Catch::Contains("node 'add' (Add) has 1 inputs, Add needs at least 2"));
  }
  SECTION("required input with an empty name") {
    n->set_input(1, "");
    CHECK_THAT(rejection(m), Catch::Contains("node 'add' (Add): required input 1 ('B') has an empty name"));
  }
  SECTION("empty output name") {
    n->set_output(0, "");
    CHECK_THAT(rejection(m), Catch::Contains("node 'add' (Add) has only empty output names"));
  }
  SECTION("no outputs, any domain") {
    n->set_domain("com.example");
    n->clear_output();
    CHECK_THAT(rejection(m), Catch::Contains("node 'add' (Add) has no outputs"));
  }
  SECTION("optional inputs may be empty") {
    n->set_op_type("Clip");
    n->set_input(1, "");
    CHECK(rejection(m).empty());
  }
}

TEST_CASE("validate: every shared and bundled model loads") {
  int loaded = 0;
  for (const auto& dir : {test::shared_models(), test::shared_models() / "extra", test::source_dir() / "models"})
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".onnx") {
        INFO(e.path());
        CHECK_NOTHROW(load_model(e.path(), {.load_external_data = false}));
        ++loaded;
      }
  CHECK(loaded > 5);
}

TEST_CASE("validate: external-data tensors aliasing one range are refused before they are read") {
  const fs::path dir = test::scratch_dir("validate_alias");
  {
    std::ofstream(dir / "a.data", std::ios::binary) << std::string(1024, '\1');
  }
  auto m = add_model();
  auto* g = m.mutable_graph();
  g->clear_initializer();
  for (int i = 0; i < 4; ++i) {
    auto* t = g->add_initializer();
    t->set_name("W" + std::to_string(i));
    t->set_data_type(onnx::TensorProto::FLOAT);
    t->add_dims(256);
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    for (auto [k, v] : {std::pair{"location", "a.data"}, {"offset", "0"}, {"length", "1024"}}) {
      auto* kv = t->add_external_data();
      kv->set_key(k);
      kv->set_value(v);
    }
  }
  g->mutable_node(0)->set_input(1, "W0");
  {
    std::ofstream out(dir / "m.onnx", std::ios::binary);
    m.SerializeToOstream(&out);
  }
  try {
    load_model(dir / "m.onnx");
    FAIL("aliased external data was loaded");
  } catch (const BadInputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("initializer 'W1'") && Catch::Contains("read 2048 bytes") &&
                             Catch::Contains("which holds 1024") && Catch::Contains("alias"));
  }
}
