# ONNX Runtime loads and runs models that qtool re-saved with external data (needs the `ort` fixture).
add_test(NAME "onnx: external data written by qtool convert runs in ONNX Runtime with identical outputs"
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/ort_external_data.py $<TARGET_FILE:qtool>
                 ${QTOOL_SHARED_DIR} ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/test_scratch/ort_external_data)
set_tests_properties("onnx: external data written by qtool convert runs in ONNX Runtime with identical outputs"
                     PROPERTIES FIXTURES_REQUIRED ort TIMEOUT 300)
add_test(NAME "onnx: big models convert and quantize in bounded memory (external data streamed and spilled)"
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/big_model_memory.py $<TARGET_FILE:qtool> ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test_scratch/big_model_memory)
set_tests_properties("onnx: big models convert and quantize in bounded memory (external data streamed and spilled)"
                     PROPERTIES FIXTURES_REQUIRED ort TIMEOUT 300)
