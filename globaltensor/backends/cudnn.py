"""flow.backends.cudnn / torch.backends.cudnn: the cuDNN switches, plain flags here (the numpy and CUDA kernels use no cuDNN)."""
enabled = True  # PyTorch's switch; nothing reads it
benchmark = False  # OneFlow's and PyTorch's autotuning switch; nothing to tune
deterministic = False  # set by PyTorch/OneFlow code (OneFlow's test support sets True); the kernels are deterministic
allow_tf32 = False
