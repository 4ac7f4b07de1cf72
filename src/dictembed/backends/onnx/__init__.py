"""The ONNX Runtime backend: `graph.py` (export, fusion, int8), `runtime.py` (the backbone run by ONNX Runtime),
`export.py` (an exported model folder)."""
