# Triton's interpreter must be switched on before triton is first imported, so that the
# Triton kernels run on machines without a GPU. Where CUDA is present the kernels run
# compiled (set TRITON_INTERPRET=1 yourself to force the interpreter there).
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
