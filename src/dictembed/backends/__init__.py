"""Inference backends that run an Encoder's backbone in place of torch: `onnx/` (ONNX Runtime) and `openvino.py`
(OpenVINO, the same graph)."""
