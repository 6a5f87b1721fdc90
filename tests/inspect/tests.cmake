# qtool inspect QUANT --against FLOAT: metrics against numpy, self-comparison, text report, bad input (exit 2).
add_test(NAME "inspect: compare a quantized model against its float original (--against)"
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/compare_cli.py $<TARGET_FILE:qtool> ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test_scratch/inspect_compare)
set_tests_properties("inspect: compare a quantized model against its float original (--against)" PROPERTIES TIMEOUT 120)
