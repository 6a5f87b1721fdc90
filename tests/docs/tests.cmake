# The README's commands, their outputs, exit codes and option names against the real qtool (issue 15).
add_test(NAME "docs: README commands print what the README shows"
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/readme_check.py ${CMAKE_BINARY_DIR}/bin ${CMAKE_SOURCE_DIR}
                 ${QTOOL_SHARED_DIR} ${CMAKE_BINARY_DIR}/test_scratch/readme_check)
set_tests_properties("docs: README commands print what the README shows" PROPERTIES TIMEOUT 300 LABELS release_figures)
# Label `release_figures`: the README shows what the Release build prints. A build at another optimisation level
# (the ASan pass of scripts/test.sh, -O1) rounds float sums in another order, so its calibration ranges differ in
# the 7th digit and a printed SQNR moves (mobilenetv2: 27.3 dB Release, 24.8 dB at -O1); that pass leaves it out.
# The QConfig reference against the keys the parser accepts.
add_test(NAME "docs: the QConfig reference names every key the parser accepts"
         COMMAND /usr/bin/python3 ${CMAKE_CURRENT_LIST_DIR}/qconfig_doc_check.py ${CMAKE_SOURCE_DIR})
