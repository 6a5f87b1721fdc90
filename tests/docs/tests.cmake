# The README's commands, their outputs, exit codes and option names against the real qtool (issue 15).
add_test(NAME "docs: README commands print what the README shows"
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/readme_check.py ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR}
                 ${QTOOL_SHARED_DIR} ${CMAKE_BINARY_DIR}/test_scratch/readme_check)
set_tests_properties("docs: README commands print what the README shows" PROPERTIES TIMEOUT 300)
