# qtool quantize: script tests against ONNX Runtime 1.30 (Debian's /usr/bin/python3 for numpy/onnx).
set(_qz_env "QTOOL_EXE=${CMAKE_BINARY_DIR}/bin/qtool;QTOOL_SHARED_DIR=${QTOOL_SHARED_DIR}")
set(_qz_dir ${CMAKE_CURRENT_LIST_DIR})

add_test(NAME "quantize: cli errors, determinism, ORT and TensorRT structure" COMMAND /usr/bin/python3 ${_qz_dir}/cli_check.py)
add_test(NAME "quantize: preparation passes keep ORT outputs on the shared models"
         COMMAND /usr/bin/python3 ${_qz_dir}/prepare_check.py)
add_test(NAME "quantize: patterns (mask fills, -inf sentinels, mixed Concat) in ORT"
         COMMAND /usr/bin/python3 ${_qz_dir}/patterns.py)
foreach(model mobilenetv2 ocr cls vad superres digits)
  add_test(NAME "quantize: acceptance ${model}" COMMAND /usr/bin/python3 ${_qz_dir}/acceptance.py ${model})
endforeach()
get_property(_qz_tests DIRECTORY PROPERTY TESTS)
foreach(t ${_qz_tests})
  if(t MATCHES "^quantize: (cli|preparation|patterns|acceptance)")
    set_tests_properties("${t}" PROPERTIES FIXTURES_REQUIRED ort ENVIRONMENT "${_qz_env}" TIMEOUT 600)
  endif()
endforeach()
