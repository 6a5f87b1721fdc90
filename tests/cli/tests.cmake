# CLI behaviour on bad input: exit code 2 and exactly one stderr line naming the file (inspect, convert).
add_test(NAME "cli: bad input gives exit code 2 and one line naming the file"
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/bad_inputs.py $<TARGET_FILE:qtool> ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test_scratch/cli_bad_inputs)
set_tests_properties("cli: bad input gives exit code 2 and one line naming the file" PROPERTIES TIMEOUT 120)
