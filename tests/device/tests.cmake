# test_device captures the -v log (spdlog) to check which nodes are named.
target_link_libraries(test_device PRIVATE spdlog::spdlog)

# --device without a CUDA device (every build), and in CUDA builds the GPU check: the CUDA observer backend against
# the CPU and the cuDNN Conv against the CPU Conv on a real device, skipped (exit 77) when none is present.
add_test(NAME "device: --device cuda without a device exits 2 with one line"
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/device/no_device.sh $<TARGET_FILE:qtool> ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test_scratch/no_device)
set_tests_properties("device: --device cuda without a device exits 2 with one line" PROPERTIES SKIP_RETURN_CODE 77)

if(QTOOL_CUDA)
  add_executable(gpu_check ${CMAKE_SOURCE_DIR}/tests/device/gpu/gpu_check.cc ${CMAKE_SOURCE_DIR}/tests/kernels/kernel_harness.cc)
  target_link_libraries(gpu_check PRIVATE qtool_all qtool_warnings)
  target_include_directories(gpu_check PRIVATE ${CMAKE_SOURCE_DIR}/tests/kernels)
  add_test(NAME "device: CUDA observers and Conv equal the CPU on a GPU" COMMAND gpu_check)
  set_tests_properties("device: CUDA observers and Conv equal the CPU on a GPU" PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
  add_test(NAME "device: every shared model runs on the GPU as on the CPU"
           COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/device/gpu/run_models.py $<TARGET_FILE:qtool>
                   ${QTOOL_SHARED_DIR} ${CMAKE_BINARY_DIR}/test_scratch/gpu_models)
  set_tests_properties("device: every shared model runs on the GPU as on the CPU" PROPERTIES SKIP_RETURN_CODE 77
                       TIMEOUT 900)
endif()
