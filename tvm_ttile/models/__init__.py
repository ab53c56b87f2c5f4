"""Model import (ONNX, PyTorch) and the built-in model zoo."""
