# CLI behaviour on bad input: exit code 2 and exactly one stderr line naming the file (inspect, convert).
add_test(NAME "cli: bad input gives exit code 2 and one line naming the file"
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/bad_inputs.py $<TARGET_FILE:qtool> ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test_scratch/cli_bad_inputs)
set_tests_properties("cli: bad input gives exit code 2 and one line naming the file" PROPERTIES TIMEOUT 120)

# Hostile models and configs (docs/reliability.md "Models and configs"): corrupt tensors and nodes, crashes,
# regexes, shape-arithmetic overflow, resource limits, fixed scales and foreign calibration tables.
add_test(NAME "cli: hostile models and configs give exit code 2 and one line naming the problem"
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/hostile_models.py $<TARGET_FILE:qtool>
                 ${CMAKE_BINARY_DIR}/test_scratch/cli_hostile_models)
set_tests_properties("cli: hostile models and configs give exit code 2 and one line naming the problem"
                     PROPERTIES TIMEOUT 120)

# Hostile files (docs/reliability.md "Files"): outputs naming inputs, planted temporary names, signals and a full
# disk during writes, FIFOs and folders as inputs, zip bombs; exit 2 with one line, no temporary file left behind,
# inputs byte-identical.
add_test(NAME "cli: hostile files are refused and never lose or leave a file"
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/hostile_files.py $<TARGET_FILE:qtool> ${CMAKE_SOURCE_DIR}
                 ${QTOOL_SHARED_DIR} ${CMAKE_BINARY_DIR}/test_scratch/cli_hostile_files)
set_tests_properties("cli: hostile files are refused and never lose or leave a file" PROPERTIES TIMEOUT 120)

# Option parity and provenance (issue 15): calibrate's options are quantize's too, --threads defaults to all cores
# everywhere, and a quantized model records producer qtool, its version and the config and calibration digests.
add_test(NAME "cli: quantize accepts calibrate's options; outputs record producer, config and calibration digests"
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/options_provenance.py $<TARGET_FILE:qtool> ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test_scratch/cli_options_provenance)
set_tests_properties("cli: quantize accepts calibrate's options; outputs record producer, config and calibration digests"
                     PROPERTIES TIMEOUT 120 ENVIRONMENT OMP_WAIT_POLICY=PASSIVE)
