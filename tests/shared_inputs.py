"""One real input per shared model, as ../shared/data/README.md assigns them: the table the ONNX Runtime checks
(tests/onnx/ort_external_data.py, tests/quantize/prepare_check.py) share, so a model added to ../shared/models is
assigned its input once. Keys: model paths relative to SHARED/models; values: input name -> .npy path."""
import os


def one_input_per_model(shared):
    def t(name):
        return os.path.join(shared, "data", "tensors", name)

    return {
        "mobilenetv2-1.0-224-fp32.onnx": {"input": t("mobilenetv2_chelsea.npy")},
        "extra/mobilenetv2-1.0-224-int8-qdq-st.onnx": {"serving_default_input_1:0": t("mobilenetv2int8_chelsea.npy")},
        "ppocrv4-det.onnx": {"x": t("ppocrdet_ocr_rendered.npy")},
        "ppocrv4-rec.onnx": {"x": t("ppocrrec_rendered_line0.npy")},
        "ppocr-mobile-v2-cls.onnx": {"x": t("ppocrcls_rendered_line0_upright.npy")},
        "silero-vad-16k-flat.onnx": {"input": t("vad_chunk576_speech.npy"), "state": t("vad_state_zeros.npy")},
        "superres-espcn-3x.onnx": {"input": t("superres_bus_lr_y.npy")},
        "digits-vit.onnx": {"pixel_values": t("digits_test64.npy")},
    }
