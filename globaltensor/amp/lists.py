"""Autocast's op lists as data: which ops run in the low dtype and which in float32, per device type."""

# Each name is a registered primitive (dispatch casts its inputs) or a composite decorated with
# dispatch.amp_entry(name) (its arguments cast, its body run with autocast off). tests/amp checks
# that every name is one or the other. Ops on neither list run in their inputs' dtypes (PyTorch's
# type promotion: bfloat16 with float32 gives float32).

# PyTorch 2.x, aten/src/ATen/autocast_mode.cpp, CPU: lower_precision_fp and fp32 lists (the ops gt has).
CPU_LOWER = ("matmul", "linear", "linear_in_out", "conv2d", "attention", "prelu")
CPU_FLOAT32 = ("prod", "mse_loss", "nll_loss", "cross_entropy", "l1_loss", "smooth_l1_loss", "huber_loss",
               "kl_div", "binary_cross_entropy", "binary_cross_entropy_with_logits")

# CUDA: lower_precision_fp and fp32 (plus fp32_set_opt_dtype: softmax, log_softmax, prod, cumsum).
# sum stays off the list here: gt's composites (mean, var, ...) are built from it.
CUDA_LOWER = ("matmul", "linear", "linear_in_out", "conv2d", "attention", "prelu")
CUDA_FLOAT32 = ("acos", "asin", "cosh", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal", "rsqrt",
                "sinh", "tan", "pow", "softplus", "layer_norm", "softmax", "log_softmax", "prod",
                "cumsum") + CPU_FLOAT32[1:]

# Paddle 3.3.1 (python/paddle/amp/amp_lists.py), by gt's names for its ops. O1: white runs in the
# low dtype, black in float32, the rest follow their inputs (a float32 input: float32). O2: every op
# in the low dtype but O2's black list (embedding lookups, interpolation, scatter).
PADDLE_WHITE = ("matmul", "linear", "linear_in_out", "conv2d", "attention")
PADDLE_BLACK = ("exp", "expm1", "log", "log10", "log2", "tan", "acos", "asin", "sinh", "cosh", "softplus",
                "pow", "reciprocal", "rsqrt", "sum", "mean", "prod", "cumsum", "softmax", "log_softmax",
                "cross_entropy", "nll_loss", "huber_loss", "binary_cross_entropy_with_logits", "layer_norm",
                "embedding", "scatter", "square", "atanh")
PADDLE_O2_BLACK = ("embedding", "scatter")
# Paddle's op names (custom_white_list / custom_black_list) -> gt's; others are taken as gt's own
PADDLE_NAMES = {"matmul_v2": ("matmul",), "mul": ("matmul",), "linear_v2": ("linear", "linear_in_out"),
                "fused_gemm_epilogue": ("linear", "linear_in_out"), "flash_attn": ("attention",),
                "reduce_sum": ("sum",), "reduce_mean": ("mean",), "reduce_prod": ("prod",),
                "softmax_with_cross_entropy": ("cross_entropy",), "cross_entropy2": ("cross_entropy",),
                "sigmoid_cross_entropy_with_logits": ("binary_cross_entropy_with_logits",),
                "lookup_table": ("embedding",), "lookup_table_v2": ("embedding",)}

# never cast by autocast (the cast itself; ops whose float inputs are indices or masks)
NEVER = ("cast",)

LISTS = {"cpu": (CPU_LOWER, CPU_FLOAT32), "cuda": (CUDA_LOWER, CUDA_FLOAT32)}

__all__ = ["CPU_LOWER", "CPU_FLOAT32", "CUDA_LOWER", "CUDA_FLOAT32", "PADDLE_WHITE", "PADDLE_BLACK", "PADDLE_O2_BLACK",
           "PADDLE_NAMES", "NEVER", "LISTS"]
