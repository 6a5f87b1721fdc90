# qtool inspect --report: the HTML report rendered in headless Chromium (skipped when chromium is absent).
add_test(NAME "report: HTML report renders in Chromium"
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/report/render_report.py $<TARGET_FILE:qtool>
                 ${QTOOL_SHARED_DIR} ${CMAKE_BINARY_DIR}/test_scratch/report)
set_tests_properties("report: HTML report renders in Chromium" PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77)
