# Script tests of lib/numerics: bit-exact comparison with ONNX Runtime 1.30 (needs node + onnxruntime-node and
# Debian's python3-onnx/numpy for the case generator).
add_executable(qdq_ort_compare ${CMAKE_CURRENT_LIST_DIR}/tools/qdq_ort_compare.cc)
target_link_libraries(qdq_ort_compare PRIVATE qtool_numerics qtool_tensorio nlohmann_json::nlohmann_json qtool_warnings)
add_test(NAME "numerics: QuantizeLinear/DequantizeLinear/FP8 Cast bit-exact with ONNX Runtime"
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/numerics/ort_compare.sh ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test_scratch/qdq_ort_cases $<TARGET_FILE:qdq_ort_compare>)
set_tests_properties("numerics: QuantizeLinear/DequantizeLinear/FP8 Cast bit-exact with ONNX Runtime"
                     PROPERTIES FIXTURES_REQUIRED ort TIMEOUT 300)
