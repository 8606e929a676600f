"""A recurrent layer's kernel streams its recurrent weights once per time step
(perfcast.features.kernels.recurrent_weight_bytes): the steps depend on each other."""

from perfcast.features.kernels import lower_node, recurrent_weight_bytes


def _lstm_shapes(n: int, t: int, inp: int, h: int, batch_first: bool = True):
    x = (n, t, inp) if batch_first else (t, n, inp)
    per_dir = [(4 * h, inp), (4 * h, h), (4 * h,), (4 * h,)]
    return [x, (2, n, h), (2, n, h), *per_dir, *per_dir], [(n, t, 2 * h), (2, n, h), (2, n, h)]


def test_lstm_streams_w_hh_once_per_step():
    ins, outs = _lstm_shapes(n=3, t=50, inp=40, h=32)
    k, = lower_node("lstm", ins, outs, {"macs": 1.0}, 2.0, "fp32")
    plain, = lower_node("cumsum", ins, outs, {}, 2.0, "fp32")  # any stream op: tensors once
    extra = 49 * 2 * (4 * 32 * 32) * 4  # T − 1 more reads of both directions' W_hh, fp32
    assert k.kernel_class == "stream"
    assert k.stream_bytes - plain.stream_bytes == extra
    assert recurrent_weight_bytes(ins, 4) == extra


def test_steps_read_from_the_state_not_the_layout():
    a, _ = _lstm_shapes(n=3, t=50, inp=40, h=32, batch_first=True)
    b, _ = _lstm_shapes(n=3, t=50, inp=40, h=32, batch_first=False)
    assert recurrent_weight_bytes(a, 2) == recurrent_weight_bytes(b, 2) > 0
    # twice the sequence, twice the streamed weights (one step less each)
    c, _ = _lstm_shapes(n=3, t=99, inp=40, h=32)
    assert recurrent_weight_bytes(c, 2) == 2 * recurrent_weight_bytes(a, 2)


def test_no_state_no_extra_bytes():
    assert recurrent_weight_bytes([(50, 40), (128, 40), (128, 32)], 4) == 0.0
