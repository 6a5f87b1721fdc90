# Script tests of the interpreter: `qtool run` against ONNX Runtime 1.30 on the repository's tiny models
# (needs node + onnxruntime-node and Debian's python3-numpy; the tiny models need the compute kernels).
add_test(NAME "runtime: qtool run matches ONNX Runtime on tiny If/Loop/QDQ/conv models"
         COMMAND bash ${CMAKE_SOURCE_DIR}/tests/runtime/ort_run_compare.sh ${CMAKE_SOURCE_DIR}
                 ${CMAKE_BINARY_DIR}/test_scratch/runtime_ort_compare $<TARGET_FILE:qtool>)
set_tests_properties("runtime: qtool run matches ONNX Runtime on tiny If/Loop/QDQ/conv models"
                     PROPERTIES FIXTURES_REQUIRED ort TIMEOUT 300 ENVIRONMENT OMP_WAIT_POLICY=PASSIVE)
# Models stamped with ai.onnx opsets 22-26 (tests/runtime/opsets_22_26.py): `qtool run` against ONNX Runtime 1.30,
# calibrate + quantize of a CNN and a transformer block loaded and run in ORT, and the refusals by name.
add_test(NAME "runtime: opsets 22-26 models run as in ONNX Runtime and quantize"
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/runtime/opsets_22_26.py
                 ${CMAKE_BINARY_DIR}/test_scratch/opsets_22_26)
set_tests_properties("runtime: opsets 22-26 models run as in ONNX Runtime and quantize"
                     PROPERTIES FIXTURES_REQUIRED ort TIMEOUT 300
                                ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;QTOOL_EXE=$<TARGET_FILE:qtool>")
# ONNX Runtime's contrib ops (what its transformer optimizer writes) against ORT 1.30, one tiny model per op and
# variant built in the script, and the variants qtool refuses (exit 2, one line).
add_test(NAME "runtime: ORT contrib ops (SkipLayerNorm, FastGelu, FusedMatMul, Attention...) match ONNX Runtime"
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/runtime/contrib_ops.py)
set_tests_properties("runtime: ORT contrib ops (SkipLayerNorm, FastGelu, FusedMatMul, Attention...) match ONNX Runtime"
                     PROPERTIES FIXTURES_REQUIRED ort TIMEOUT 300
                     ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;QTOOL_EXE=$<TARGET_FILE:qtool>")
# Attention ops of models from outside qtool (ai.onnx Attention-23/24, ORT's MultiHeadAttention and
# GroupQueryAttention) against ORT 1.30, one tiny model per option, and the variants qtool refuses.
add_test(NAME "runtime: Attention-23/24, MultiHeadAttention, GroupQueryAttention match ONNX Runtime"
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/runtime/attention_ops.py)
set_tests_properties("runtime: Attention-23/24, MultiHeadAttention, GroupQueryAttention match ONNX Runtime"
                     PROPERTIES FIXTURES_REQUIRED ort TIMEOUT 300
                     ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;QTOOL_EXE=$<TARGET_FILE:qtool>")
# Already-quantized models (ORT's QOperator format, dynamic quantization, MatMulNBits / GatherBlockQuantized):
# `qtool run` against ONNX Runtime 1.30 on one tiny model per op and variant, integers bit for bit, and the refusals.
add_test(NAME "runtime: QOperator, dynamic and int4 ops (QLinearConv, MatMulInteger, MatMulNBits...) match ONNX Runtime"
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/runtime/qoperator_ops.py)
set_tests_properties("runtime: QOperator, dynamic and int4 ops (QLinearConv, MatMulInteger, MatMulNBits...) match ONNX Runtime"
                     PROPERTIES FIXTURES_REQUIRED ort TIMEOUT 300
                     ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;QTOOL_EXE=$<TARGET_FILE:qtool>")
# A model in ORT's QOperator format built next to its float original (tests/runtime/qoperator_model.py): qtool run
# equals ORT, inspect --against compares the two, inspect lists its integer ops and weights, quantize finds nothing left.
add_test(NAME "runtime: a QOperator model runs as in ONNX Runtime, compares with its float model, quantize refuses it"
         COMMAND /usr/bin/python3 ${CMAKE_SOURCE_DIR}/tests/runtime/qoperator_model.py
                 ${CMAKE_BINARY_DIR}/test_scratch/qoperator_model)
set_tests_properties("runtime: a QOperator model runs as in ONNX Runtime, compares with its float model, quantize refuses it"
                     PROPERTIES FIXTURES_REQUIRED ort TIMEOUT 300
                     ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;QTOOL_EXE=$<TARGET_FILE:qtool>")
# Sequences of tensors (runtime/value.h) and GlobalLpPool: `qtool run` against ONNX Runtime 1.30 on tiny onnx.helper
# models (split/concat round trips, construct/insert/erase/at/length, a Loop building a list, an If returning a
# sequence, SequenceMap) and torch.jit.script exports; sequence graph inputs and outputs; the refusals and the limit.
add_test(NAME "runtime: sequence ops (SplitToSequence, Loop-built lists, If, SequenceMap) match ONNX Runtime"
         COMMAND /usr/bin/python3 -W ignore ${CMAKE_SOURCE_DIR}/tests/runtime/sequence_ops.py)
set_tests_properties("runtime: sequence ops (SplitToSequence, Loop-built lists, If, SequenceMap) match ONNX Runtime"
                     PROPERTIES FIXTURES_REQUIRED ort TIMEOUT 300
                     ENVIRONMENT "OMP_WAIT_POLICY=PASSIVE;QTOOL_EXE=$<TARGET_FILE:qtool>")
