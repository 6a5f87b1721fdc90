#include <onnx/onnx_pb.h>

#include <catch2/catch.hpp>

#include "onnx/tensor_proto.h"

TEST_CASE("a TensorProto declaring a huge shape without the data is rejected before allocating") {
  onnx::TensorProto p;
  p.set_name("x");
  p.set_data_type(onnx::TensorProto::FLOAT);
  p.add_dims(1 << 20);
  p.add_dims(1 << 20);
  p.add_float_data(1.0f);
  CHECK_THROWS_AS(qtool::onnxio::tensor_from_proto(p), qtool::BadInputError);
  p.clear_float_data();
  p.set_raw_data(std::string(8, '\0'));
  CHECK_THROWS_AS(qtool::onnxio::tensor_from_proto(p), qtool::BadInputError);
}
