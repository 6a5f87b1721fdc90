# qtool calibrate on every shared model with its real inputs (coverage of every float activation, graph outputs'
# min/max against ONNX Runtime's reference outputs), and the CLI's errors on bad data.
set(_calib_t ${QTOOL_SHARED_DIR}/data/tensors)
set(_calib_ref ${QTOOL_SHARED_DIR}/data/reference_outputs)
set(_calib_out ${CMAKE_BINARY_DIR}/test_scratch/calib_cli)
file(MAKE_DIRECTORY ${_calib_out})

function(qtool_calibrate_test name model samples reference)
  add_test(NAME "calib: calibrate ${name}"
           COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/calib/check_calibration.py
                   $<TARGET_FILE:qtool> ${QTOOL_SHARED_DIR}/models/${model} ${_calib_out}/${name}.json
                   --samples ${samples} ${reference} -- --threads 2 ${ARGN})
  set_tests_properties("calib: calibrate ${name}" PROPERTIES TIMEOUT 600)
endfunction()

qtool_calibrate_test(mobilenetv2 mobilenetv2-1.0-224-fp32.onnx 6
                     "--reference=${_calib_ref}/mobilenetv2-1.0-224-fp32__calib6_batch"
                     --data input=${_calib_t}/mobilenetv2_calib6.npy --batch-size 3 --methods all)
qtool_calibrate_test(ppocrv4-det ppocrv4-det.onnx 1 "--reference=${_calib_ref}/ppocrv4-det__ocr_rendered"
                     --data x=${_calib_t}/ppocrdet_ocr_rendered.npy)
qtool_calibrate_test(ppocrv4-rec ppocrv4-rec.onnx 1 "--reference=${_calib_ref}/ppocrv4-rec__rendered_line0"
                     --data x=${_calib_t}/ppocrrec_rendered_line0.npy)
qtool_calibrate_test(ppocr-cls ppocr-mobile-v2-cls.onnx 1 "--reference=${_calib_ref}/ppocr-mobile-v2-cls__line0_upright"
                     --data x=${_calib_t}/ppocrcls_rendered_line0_upright.npy)
qtool_calibrate_test(silero-vad silero-vad-16k-flat.onnx 1 "--reference=${_calib_ref}/silero-vad-16k-flat__chunk_speech"
                     --data input=${_calib_t}/vad_chunk576_speech.npy --data state=${_calib_t}/vad_state_zeros.npy)
qtool_calibrate_test(superres superres-espcn-3x.onnx 1 "--reference=${_calib_ref}/superres-espcn-3x__bus_lr"
                     --data input=${_calib_t}/superres_bus_lr_y.npy)
qtool_calibrate_test(digits-vit digits-vit.onnx 128 "--reference="
                     --data pixel_values=${_calib_t}/digits_calib_images.npy --batch-size 32)
qtool_calibrate_test(digits-vit-test64 digits-vit.onnx 64 "--reference=${_calib_ref}/digits-vit__test64"
                     --data pixel_values=${_calib_t}/digits_test64.npy --batch-size 64 --methods minmax)

add_test(NAME "calib: calibrate errors on bad data"
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/calib/cli_errors.sh $<TARGET_FILE:qtool> ${QTOOL_SHARED_DIR}
                 ${CMAKE_BINARY_DIR}/test_scratch/calib_errors)

# --random on token inputs: ids below the embedding's rows, masks, positions, type ids, the sequence from the position
# table, --shape SYMBOL=N; an integer input nothing bounds is exit 2 naming it and --data.
add_test(NAME "calib: --random fills token inputs as the graph reads them"
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/calib/random_inputs.py $<TARGET_FILE:qtool>
                 ${CMAKE_BINARY_DIR}/test_scratch/calib_random_inputs)
set_tests_properties("calib: --random fills token inputs as the graph reads them" PROPERTIES TIMEOUT 300)

# calibrate --merge (halves merge to the table of all) and TensorRT calibration caches (export, decode, import).
add_test(NAME "calib: merge tables and TensorRT cache"
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/calib/merge_interchange.py $<TARGET_FILE:qtool>
                 ${QTOOL_SHARED_DIR} ${CMAKE_BINARY_DIR}/test_scratch/calib_merge)
set_tests_properties("calib: merge tables and TensorRT cache" PROPERTIES TIMEOUT 600)
