// Sequences of tensors as interpreter values (runtime/value.h): graph inputs and outputs, the tap, Loop-carried
// lists, copy-on-write between readers, in-place appends, and the errors. Kernel values are pinned against ONNX
// Runtime by tests/runtime/sequence_ops.py and the ONNX backend vectors (conformance_test.cc).
#include <catch2/catch.hpp>
#include <map>

#include "model_builder.h"
#include "runtime/kernels/kernels.h"
#include "runtime/session.h"

using qtool::DType;
using qtool::Tensor;
using qtool::runtime::SequenceRef;
using qtool::runtime::Session;
using qtool::runtime::TensorSequence;
using qtool::runtime::Value;
using qtool::test::ModelBuilder;

namespace {

void sequence_value(onnx::ValueInfoProto* vi, const std::string& name, DType elem = DType::Float32) {
  vi->set_name(name);
  vi->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
      static_cast<int>(elem));
}

SequenceRef sequence_of(std::vector<Tensor> items, DType elem = DType::Float32) {
  auto s = std::make_shared<TensorSequence>();
  s->elem_dtype = elem;
  s->items = std::move(items);
  return s;
}

onnx::NodeProto& add(onnx::GraphProto& g, const std::string& op, std::vector<std::string> in,
                     std::vector<std::string> out) {
  auto* n = g.add_node();
  n->set_op_type(op);
  for (auto& i : in) n->add_input(i);
  for (auto& o : out) n->add_output(o);
  return *n;
}

// Loop(trips, "", SequenceEmpty) whose body appends Cast(iter) as float: acc = [0, 1, ..., trips - 1]; also stacked.
ModelBuilder loop_building_a_list() {
  ModelBuilder b(13);
  b.input("trips", DType::Int64, {});
  onnx::GraphProto body;
  body.set_name("body");
  ModelBuilder::value(body.add_input(), "i", DType::Int64, {});
  ModelBuilder::value(body.add_input(), "cond_in", DType::Bool, {});
  sequence_value(body.add_input(), "acc_in");
  ModelBuilder::attr(add(body, "Cast", {"i"}, {"item"}), "to", int64_t{1});
  add(body, "SequenceInsert", {"acc_in", "item"}, {"acc_out"});
  add(body, "Identity", {"cond_in"}, {"cond_out"});
  ModelBuilder::value(body.add_output(), "cond_out", DType::Bool, {});
  sequence_value(body.add_output(), "acc_out");
  b.node("SequenceEmpty", {}, {"empty"});
  ModelBuilder::attr(b.node("Loop", {"trips", "", "empty"}, {"acc"}, "loop"), "body", body);
  b.node("SequenceLength", {"acc"}, {"n"});
  sequence_value(b.graph().add_output(), "acc");
  b.output("n", DType::Int64);
  return b;
}

}  // namespace

TEST_CASE("a Loop builds a list: run_values returns the sequence, run leaves it out") {
  Session s(loop_building_a_list().model);
  const auto values = s.run_values({{"trips", Value(Tensor::scalar<int64_t>(2000))}});
  const Value& acc = values.at("acc");
  REQUIRE(acc.is_sequence());
  REQUIRE(acc.sequence->size() == 2000);
  CHECK(acc.sequence->elem_dtype == DType::Float32);
  CHECK(acc.sequence->items[1999].data<float>()[0] == 1999.f);
  CHECK(values.at("n").tensor.data<int64_t>()[0] == 2000);
  // Tensor-only callers (calibration, the accuracy guard) get the tensor outputs.
  const auto tensors = s.run({{"trips", Tensor::scalar<int64_t>(3)}});
  CHECK(tensors.count("acc") == 0);
  CHECK(tensors.at("n").data<int64_t>()[0] == 3);
  // Zero trips: the initial empty sequence comes out.
  CHECK(s.run_values({{"trips", Value(Tensor::scalar<int64_t>(0))}}).at("acc").sequence->size() == 0);
}

TEST_CASE("the tap sees tensors only, with tap_subgraphs too") {
  Session s(loop_building_a_list().model);
  std::map<std::string, int> seen;
  qtool::runtime::RunOptions ro;
  ro.tap_subgraphs = true;
  ro.tap = [&](const std::string& n, const Tensor& v) {
    CHECK(!v.empty());
    ++seen[n];
  };
  s.run({{"trips", Tensor::scalar<int64_t>(4)}}, ro);
  CHECK(seen["item"] == 4);
  CHECK(seen["n"] == 1);
  CHECK(seen.count("acc") == 0);
  CHECK(seen.count("acc_in") == 0);
  CHECK(seen.count("empty") == 0);
}

// Two readers of one sequence: the first (not its last reader) gets a copy to insert into, so the other reader still
// sees the original; the last reader may append in place. In both node orders.
TEST_CASE("a sequence read twice is copied on write, never modified under another reader") {
  for (bool insert_first : {true, false}) {
    ModelBuilder b(13);
    b.input("a", DType::Float32, {2});
    b.node("SequenceConstruct", {"a", "a"}, {"s"});
    auto insert = [&] { b.node("SequenceInsert", {"s", "a"}, {"s1"}); };
    auto length = [&] { b.node("SequenceLength", {"s"}, {"n"}); };
    if (insert_first) {
      insert();
      length();
    } else {
      length();
      insert();
    }
    b.node("SequenceLength", {"s1"}, {"n1"});
    b.output("n", DType::Int64);
    b.output("n1", DType::Int64);
    const auto out = Session(b.model).run({{"a", Tensor::from_vector<float>({2}, {1, 2})}});
    CHECK(out.at("n").data<int64_t>()[0] == 2);
    CHECK(out.at("n1").data<int64_t>()[0] == 3);
  }
}

// KernelContext::take_sequence: a kernel holding the only reference modifies the sequence itself; with another
// reference alive it works on a copy and the original is unchanged.
TEST_CASE("SequenceInsert appends in place only to a sequence nobody else holds") {
  qtool::runtime::NodeInfo info;
  info.name = "ins";
  info.op_type = "SequenceInsert";
  info.inputs = {"s", "t"};
  info.outputs = {"y"};
  auto kernel = qtool::runtime::kernels::make_sequence_insert(info);
  const Tensor t = Tensor::scalar<float>(5.f);
  for (bool shared : {false, true}) {
    SequenceRef s = sequence_of({Tensor::scalar<float>(1.f)});
    TensorSequence* const original = s.get();
    SequenceRef other = shared ? s : nullptr;
    std::vector<SequenceRef> seq_ins = {std::move(s), nullptr}, seq_outs(1);
    std::vector<const Tensor*> ins = {nullptr, &t};
    std::vector<Tensor> outs(1);
    qtool::runtime::KernelContext ctx{info, ins, outs, 1, nullptr};
    ctx.seq_inputs = seq_ins;
    ctx.seq_outputs = seq_outs;
    kernel->run(ctx);
    REQUIRE(seq_outs[0]);
    CHECK(seq_outs[0]->size() == 2);
    CHECK((seq_outs[0].get() == original) == !shared);
    if (shared) CHECK(other->size() == 1);
  }
}

TEST_CASE("sequence graph inputs are checked against the declaration") {
  ModelBuilder b(13);
  sequence_value(b.graph().add_input(), "s");
  b.node("SequenceLength", {"s"}, {"n"});
  b.output("n", DType::Int64);
  Session sess(b.model);
  const auto two = sequence_of({Tensor::from_vector<float>({1}, {1}), Tensor::from_vector<float>({3}, {1, 2, 3})});
  CHECK(sess.run_values({{"s", Value(two)}}).at("n").tensor.data<int64_t>()[0] == 2);
  CHECK(sess.run_values({{"s", Value(sequence_of({}, DType::Float32))}}).at("n").tensor.data<int64_t>()[0] == 0);
  CHECK_THROWS_WITH(sess.run({{"s", Tensor::from_vector<float>({1}, {1})}}),
                    "input 's' is a tensor (float [1]), the model expects a sequence of float tensors");
  CHECK_THROWS_WITH(sess.run_values({{"s", Value(sequence_of({Tensor::scalar<int64_t>(1)}, DType::Int64))}}),
                    "input 's' is a sequence of 1 int64 tensor, the model expects a sequence of float tensors");
  CHECK_THROWS_AS(sess.run_values({{"s", Value(sequence_of({Tensor::scalar<int64_t>(1)}, DType::Float32))}}),
                  qtool::BadInputError);
}

TEST_CASE("a tensor kernel handed a sequence is a bad input naming the node") {
  ModelBuilder b(13);
  b.input("x", DType::Float32, {4});
  b.node("SplitToSequence", {"x"}, {"s"});
  b.node("Relu", {"s"}, {"y"}, "relu");
  b.output("y");
  CHECK_THROWS_WITH(Session(b.model).run({{"x", Tensor::from_vector<float>({4}, {1, 2, 3, 4})}}),
                    "Relu 'relu': input 's' is a sequence of 4 float tensors; Relu takes tensors only");
}
