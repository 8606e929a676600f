"""Map ATen operator names (forward, backward, decomposed or not) to perfcast's vocabulary."""

from __future__ import annotations

_TABLE: dict[str, str] = {}


def _add(canon: str, *names: str) -> None:
    for n in names:
        _TABLE[n] = canon


# convolutions: refined later (1d/2d/3d, depthwise, grouped, transposed)
_add("conv", "convolution", "_convolution", "conv1d", "conv2d", "conv3d", "_convolution_mode",
     "mkldnn_convolution", "cudnn_convolution", "slow_conv3d", "thnn_conv2d",
     "_slow_conv2d_forward", "slow_conv_dilated2d", "slow_conv_dilated3d")
_add("conv_transpose", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
     "cudnn_convolution_transpose", "slow_conv_transpose2d", "slow_conv_transpose3d")
# dense
_add("linear", "linear", "addmm", "_addmm_activation", "bilinear")
_add("matmul", "mm", "matmul", "dot", "mv", "addmv", "vdot", "outer", "ger", "addr")
_add("bmm", "bmm", "baddbmm", "addbmm")
# grouped matmul of mixture-of-experts layers (tokens sorted by expert, one GEMM per expert
# group; transformers' ``grouped_mm`` and its CPU fallback custom op): refined to ``linear``
_add("grouped_mm", "_grouped_mm", "grouped_mm_fallback")
_add("grouped_mm_backward", "grouped_mm_fallback_backward")
_add("einsum", "einsum")
# attention
_add("sdpa", "scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
     "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
     "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_attention_math",
     "_scaled_dot_product_fused_attention_overrideable", "_flash_attention_forward",
     "_efficient_attention_forward")
_add("multihead_attention", "_native_multi_head_attention", "multi_head_attention_forward")
# norms
_add("batch_norm", "batch_norm", "native_batch_norm", "_native_batch_norm_legit",
     "_native_batch_norm_legit_no_training", "_native_batch_norm_legit_functional",
     "_batch_norm_with_update", "_batch_norm_with_update_functional", "_batch_norm_no_update",
     "cudnn_batch_norm", "miopen_batch_norm", "_batch_norm_impl_index")
_add("layer_norm", "layer_norm", "native_layer_norm")
_add("group_norm", "group_norm", "native_group_norm")
_add("instance_norm", "instance_norm")
_add("rms_norm", "rms_norm", "_fused_rms_norm")
_add("local_response_norm", "local_response_norm")
_add("lp_normalize", "normalize")
# activations
_add("relu", "relu", "relu_", "threshold", "threshold_")
_add("relu6", "relu6", "relu6_")
_add("hardtanh", "hardtanh", "hardtanh_")
_add("leaky_relu", "leaky_relu", "leaky_relu_", "rrelu", "rrelu_with_noise")
_add("prelu", "prelu", "_prelu_kernel")
_add("elu", "elu", "elu_")
_add("selu", "selu", "selu_")
_add("celu", "celu", "celu_")
_add("gelu", "gelu", "gelu_")
_add("silu", "silu", "silu_")
_add("mish", "mish", "mish_")
_add("sigmoid", "sigmoid", "sigmoid_")
_add("hardsigmoid", "hardsigmoid", "hardsigmoid_")
_add("hardswish", "hardswish", "hardswish_")
_add("tanh", "tanh", "tanh_")
_add("softplus", "softplus")
_add("softsign", "softsign")
_add("log_sigmoid", "log_sigmoid", "log_sigmoid_forward")
_add("glu", "glu")
_add("softmax", "softmax", "_softmax", "_safe_softmax", "special_softmax")
_add("log_softmax", "log_softmax", "_log_softmax", "special_log_softmax")
# pooling (refined by rank)
_add("max_pool", "max_pool1d", "max_pool2d", "max_pool3d", "max_pool1d_with_indices",
     "max_pool2d_with_indices", "max_pool3d_with_indices", "mkldnn_max_pool2d")
_add("avg_pool", "avg_pool1d", "avg_pool2d", "avg_pool3d")
_add("adaptive_avg_pool", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d",
     "_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "mkldnn_adaptive_avg_pool2d")
_add("adaptive_max_pool", "adaptive_max_pool1d", "adaptive_max_pool2d", "adaptive_max_pool3d")
# elementwise
_add("add", "add", "add_", "_foreach_add", "add_relu")
_add("sub", "sub", "sub_", "rsub", "diff")
_add("mul", "mul", "mul_", "square")
_add("div", "div", "div_", "true_divide", "floor_divide")
_add("pow", "pow", "pow_", "float_power")
_add("maximum", "maximum", "fmax", "clamp_min", "clamp_min_")
_add("minimum", "minimum", "fmin", "clamp_max", "clamp_max_")
_add("remainder", "remainder", "fmod")
_add("sqrt", "sqrt", "sqrt_")
_add("rsqrt", "rsqrt", "rsqrt_")
_add("exp", "exp", "exp_", "exp2", "expm1")
_add("log", "log", "log_", "log1p", "log2", "log10")
_add("abs", "abs", "abs_")
_add("neg", "neg", "neg_")
_add("reciprocal", "reciprocal", "reciprocal_")
_add("erf", "erf", "erf_", "erfinv", "erfc")
_add("trig", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh")
_add("rounding", "floor", "ceil", "round", "trunc", "frac")
_add("sign", "sign", "sgn", "signbit")
_add("clamp", "clamp", "clamp_", "clip", "clip_")
_add("where", "where", "lerp", "addcmul", "addcdiv")
_add("logical", "logical_and", "logical_or", "logical_not", "logical_xor", "bitwise_and",
     "bitwise_or", "bitwise_not", "bitwise_xor", "__and__", "__or__", "__xor__", "__not__",
     "isnan", "isinf", "isfinite")
_add("compare", "eq", "ne", "lt", "le", "gt", "ge", "equal")
# reductions
_add("sum", "sum", "nansum", "histc", "bincount")  # histograms: one pass over the input
_add("mean", "mean", "nanmean")
_add("reduce_max", "amax", "max", "aminmax", "any")  # any(bool) = max
_add("reduce_min", "amin", "min", "all")  # all(bool) = min
_add("reduce_prod", "prod")
_add("arg_reduce", "argmax", "argmin")
_add("var_std", "var", "std", "var_mean", "std_mean")
_add("norm", "norm", "linalg_vector_norm", "frobenius_norm", "linalg_norm")
_add("cumsum", "cumsum", "cumsum_", "cumprod")
_add("logsumexp", "logsumexp")
# shape / memory
_add("reshape", "view", "_unsafe_view", "reshape", "flatten", "unflatten", "squeeze", "squeeze_",
     "unsqueeze", "unsqueeze_", "view_as", "_reshape_alias", "view_as_real", "view_as_complex",
     "movedim", "moveaxis")
_add("transpose", "permute", "transpose", "transpose_", "t", "swapaxes", "swapdims",
     "channel_shuffle", "native_channel_shuffle", "numpy_T", "mT")
_add("expand", "expand", "expand_as", "broadcast_to", "broadcast_tensors")
_add("concat", "cat", "concat", "concatenate", "stack", "hstack", "vstack")
_add("split", "split", "split_with_sizes", "chunk", "unbind", "tensor_split", "unsafe_split",
     "unsafe_chunk")
_add("slice", "slice", "narrow", "select", "diagonal", "as_strided")
_add("gather", "index", "index_select", "gather", "take", "take_along_dim", "masked_select")
_add("scatter", "scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce",
     "index_put", "index_put_", "index_add", "index_add_", "index_copy", "slice_scatter",
     "select_scatter", "diagonal_scatter", "as_strided_scatter", "_unsafe_index_put",
     "index_fill", "masked_scatter")
_add("pad", "pad", "constant_pad_nd", "reflection_pad1d", "reflection_pad2d",
     "reflection_pad3d", "replication_pad1d", "replication_pad2d", "replication_pad3d",
     "_pad_enum", "circular_pad")
_add("repeat", "repeat", "tile", "repeat_interleave")
_add("copy", "clone", "contiguous", "copy", "copy_", "lift_fresh_copy",
     "_local_scalar_dense", "to")
_add("cast", "_to_copy", "type_as", "_autocast_to_reduced_precision",
     "_autocast_to_full_precision")
_add("roll", "roll")
_add("flip", "flip", "fliplr", "flipud", "rot90")
_add("tril_triu", "tril", "triu", "tril_", "triu_")
_add("masked_fill", "masked_fill", "masked_fill_", "fill", "fill_", "zero_")
_add("one_hot", "one_hot")
_add("topk", "topk", "kthvalue")
_add("sort", "sort", "argsort", "msort")
_add("nonzero", "nonzero", "unique", "_unique2", "unique_consecutive")
_add("unfold", "im2col", "col2im", "unfold", "unfold_copy")
_add("pixel_shuffle", "pixel_shuffle", "pixel_unshuffle")
_add("upsample_nearest", "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
     "_upsample_nearest_exact1d", "_upsample_nearest_exact2d", "_upsample_nearest_exact3d")
_add("upsample_linear", "upsample_linear1d", "upsample_bilinear2d", "upsample_bicubic2d",
     "upsample_trilinear3d", "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa")
_add("grid_sample", "grid_sampler", "grid_sampler_2d", "grid_sampler_3d", "affine_grid_generator")
_add("constant", "full", "zeros", "ones", "empty", "empty_like", "zeros_like", "ones_like",
     "full_like", "new_full", "new_zeros", "new_ones", "new_empty", "new_empty_strided",
     "empty_strided", "arange", "linspace", "logspace", "scalar_tensor", "eye", "rand",
     "randn", "randint", "rand_like", "randn_like", "randperm", "tensor", "lift_fresh",
     "uniform", "uniform_",
     "empty_permuted", "_tensor_constant")
_add("shape_of", "sym_size", "sym_numel", "sym_stride", "size", "numel")
_add("embedding", "embedding", "embedding_bag", "_embedding_bag")
_add("dropout", "dropout", "dropout_", "native_dropout", "bernoulli", "bernoulli_",
     "feature_dropout", "feature_dropout_", "alpha_dropout", "alpha_dropout_")
_add("identity", "alias", "detach", "lift", "alias_copy", "detach_copy", "clone_identity")
_add("loss", "cross_entropy_loss", "nll_loss", "nll_loss_forward", "nll_loss2d_forward",
     "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
     "binary_cross_entropy_with_logits", "kl_div", "soft_margin_loss")
_add("lstm", "lstm", "_thnn_fused_lstm_cell", "lstm_cell", "mkldnn_rnn")
_add("gru", "gru", "_thnn_fused_gru_cell", "gru_cell")
_add("rnn", "rnn_tanh", "rnn_relu", "rnn_tanh_cell", "rnn_relu_cell")
# backward kernels
_add("conv_backward", "convolution_backward", "_convolution_double_backward",
     "mkldnn_convolution_backward", "cudnn_convolution_backward")
_add("batch_norm_backward", "native_batch_norm_backward", "_batch_norm_with_update_backward",
     "batch_norm_backward", "cudnn_batch_norm_backward", "miopen_batch_norm_backward",
     "_batch_norm_impl_index_backward")
_add("layer_norm_backward", "native_layer_norm_backward")
_add("group_norm_backward", "native_group_norm_backward")
_add("rms_norm_backward", "_fused_rms_norm_backward")
_add("relu_backward", "threshold_backward")
_add("gelu_backward", "gelu_backward")
_add("silu_backward", "silu_backward")
_add("sigmoid_backward", "sigmoid_backward")
_add("tanh_backward", "tanh_backward")
_add("hardswish_backward", "hardswish_backward")
_add("activation_backward", "hardsigmoid_backward", "leaky_relu_backward", "elu_backward",
     "softplus_backward", "mish_backward", "hardtanh_backward", "log_sigmoid_backward",
     "glu_backward", "rrelu_with_noise_backward", "_prelu_kernel_backward", "prelu_backward")
_add("softmax_backward", "_softmax_backward_data")
_add("log_softmax_backward", "_log_softmax_backward_data")
_add("max_pool_backward", "max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward",
     "max_pool1d_with_indices_backward", "adaptive_max_pool2d_backward",
     "adaptive_max_pool3d_backward", "max_pool2d_backward")
_add("avg_pool_backward", "avg_pool2d_backward", "avg_pool3d_backward", "avg_pool1d_backward")
_add("adaptive_pool_backward", "_adaptive_avg_pool2d_backward", "_adaptive_avg_pool3d_backward",
     "adaptive_avg_pool2d_backward")
_add("embedding_backward", "embedding_dense_backward", "embedding_backward",
     "_embedding_bag_backward", "_embedding_bag_dense_backward")
_add("sdpa_backward", "_scaled_dot_product_flash_attention_for_cpu_backward",
     "_scaled_dot_product_flash_attention_backward",
     "_scaled_dot_product_efficient_attention_backward",
     "_scaled_dot_product_cudnn_attention_backward", "_flash_attention_backward",
     "_efficient_attention_backward",
     "_scaled_dot_product_fused_attention_overrideable_backward")
_add("dropout_backward", "native_dropout_backward")
_add("upsample_backward", "upsample_nearest1d_backward", "upsample_nearest2d_backward",
     "upsample_nearest3d_backward", "upsample_bilinear2d_backward", "upsample_linear1d_backward",
     "upsample_bicubic2d_backward", "upsample_trilinear3d_backward",
     "_upsample_nearest_exact2d_backward", "grid_sampler_2d_backward")
_add("loss_backward", "nll_loss_backward", "nll_loss2d_backward", "mse_loss_backward",
     "l1_loss_backward", "smooth_l1_loss_backward", "huber_loss_backward",
     "binary_cross_entropy_backward", "binary_cross_entropy_with_logits_backward")
_add("shape_backward", "slice_backward", "select_backward", "narrow_backward",
     "diagonal_backward", "unfold_backward", "as_strided_backward", "index_select_backward",
     "_unsafe_index_put_backward", "expand_backward")


def aten_base_name(target: object) -> str:
    """``aten.convolution.default`` → ``convolution`` (works for OpOverload and packets)."""
    schema = getattr(target, "_schema", None)
    if schema is not None:
        return schema.name.split("::", 1)[-1]
    name = getattr(target, "__name__", None) or str(target)
    parts = str(name).split(".")
    if len(parts) >= 2 and parts[0] in ("aten", "prims", "quantized"):
        return parts[1]
    return parts[0]


def lookup(base: str) -> str | None:
    """Canonical class (possibly a family to refine: ``conv``, ``max_pool``…) or ``None``."""
    return _TABLE.get(base)
