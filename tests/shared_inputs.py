"""One real input per shared model, as ../shared/data/README.md assigns them: the table the ONNX Runtime checks
(tests/onnx/ort_external_data.py, tests/quantize/prepare_check.py) share, so a model added to ../shared/models is
assigned its input once. Keys: model paths relative to SHARED/models; values: input name -> .npy path."""
import os
import tempfile

import numpy as np


def one_input_per_model(shared, scratch=None):
    """scratch: a folder for the .npy files unpacked from .npz tensors (fastestdet, ultraface, cifar10: their first
    image); a new temporary folder when None."""
    def t(name):
        return os.path.join(shared, "data", "tensors", name)

    def first_of_npz(name):
        folder = scratch or tempfile.mkdtemp(prefix="qtool-shared-inputs-")
        z = np.load(t(name))
        out = os.path.join(folder, name[:-4] + "_first.npy")
        np.save(out, z[z.files[0]][:1])
        return out

    return {
        "mobilenetv2-1.0-224-fp32.onnx": {"input": t("mobilenetv2_chelsea.npy")},
        "extra/mobilenetv2-1.0-224-int8-qdq-st.onnx": {"serving_default_input_1:0": t("mobilenetv2int8_chelsea.npy")},
        "ppocrv4-det.onnx": {"x": t("ppocrdet_ocr_rendered.npy")},
        "ppocrv4-rec.onnx": {"x": t("ppocrrec_rendered_line0.npy")},
        "ppocr-mobile-v2-cls.onnx": {"x": t("ppocrcls_rendered_line0_upright.npy")},
        "silero-vad-16k-flat.onnx": {"input": t("vad_chunk576_speech.npy"), "state": t("vad_state_zeros.npy")},
        "superres-espcn-3x.onnx": {"input": t("superres_bus_lr_y.npy")},
        "digits-vit.onnx": {"pixel_values": t("digits_test64.npy")},
        "fastestdet-coco-352.onnx": {"input.1": first_of_npz("fastestdet_eval_bus.npz")},
        "ultraface-rfb-320.onnx": {"input": first_of_npz("ultraface_eval_faces4.npz")},
        "cifar10-resnet20.onnx": {"input": first_of_npz("cifar10_eval50.npz")},
        "llama2c-aidreams-260k.onnx": {"input_ids": t("llama2c_eval32_first2.npy")},
    }
