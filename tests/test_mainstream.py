"""The questions users ask most get physically plausible answers (issue 38, item 7).

A table of mainstream questions — ResNet-50, BERT-base, ViT-B/16 and Llama on the A100, H100,
RTX 4090, T4, V100 and this CPU; inference and training; one GPU and eight (data parallel);
vLLM and llama.cpp time to first token and per output token — each asked through
:func:`perfcast.predict` and asserted between a lower bound and a stated, generous ceiling
computed independently from the published architectures and the device registry's datasheet
numbers (the rows and every rule: ``benchmarks/mainstream_rows.py``, which
``benchmarks/mainstream_table.py`` prints as Markdown). The issue's acceptance rows are rows
too: ResNet-50 AMP training on an A100-80GB with samples/s strictly increasing over batches 1,
32, 256, 1,800–3,200 img/s at 256, and eight GPUs at global batch 2,048 ≥ 7× one at 256.

A failing row prints its value, both bounds with their rules, value ÷ lower bound, the
predictor that answered and its notes. This is a different check from
``tests/test_plausibility.py`` (properties over generated requests): here fixed questions meet
absolute bounds.
"""

from __future__ import annotations

import pytest

from benchmarks.mainstream_rows import (
    LLAMA2_7B,
    LLAMA3_8B,
    PUBLISHED_GMACS,
    PUBLISHED_PARAMS,
    bert_base,
    evaluate,
    markdown,
    resnet50,
    resnet50_convs,
    rows,
    vit_b16,
)

ROWS = rows()
#: Outcomes of the rows run so far, printed as one table after the module (``pytest -s``).
OUTCOMES = []


@pytest.fixture(scope="module", autouse=True)
def _print_table():
    yield
    if OUTCOMES:
        print("\n" + markdown(OUTCOMES))


#: Rows the slow tier asks and the fast tier leaves out: ResNet-50 training on the H100 (the
#: A100-80GB's answers it in the fast tier), and BERT-base's and ViT-B/16's one-device rows —
#: their graphs cost 14 s of CPU to build (their 8-GPU rows read them too); the fast tier keeps
#: ResNet-50 on every route, its 8-GPU rows and the LLM rows.
SLOW_ROWS = {"resnet50-train-amp-b256-h100-sxm", "bert-base-train-amp-b64-h100-sxm",
             "vit-b16-train-amp-b32-v100-32gb",
             "bert-base-infer-fp32-b1-a100-80gb", "bert-base-infer-amp-b64-t4",
             "bert-base-infer-fp32-b1-cpu", "bert-base-train-amp-b32-a100-80gb",
             "bert-base-train-amp-b32-v100-32gb", "vit-b16-infer-amp-b1-rtx4090",
             "vit-b16-infer-amp-b64-h100-sxm", "vit-b16-infer-fp32-b1-cpu",
             "vit-b16-train-amp-b64-a100-80gb", "bert-base-dp8-amp-b256-a100-80gb",
             "vit-b16-dp8-amp-b512-h100-sxm"}
assert SLOW_ROWS <= {r.id for r in ROWS}, SLOW_ROWS - {r.id for r in ROWS}


@pytest.mark.parametrize("row", [pytest.param(r, marks=pytest.mark.slow) if r.id in SLOW_ROWS
                                 else r for r in ROWS], ids=[r.id for r in ROWS])
def test_mainstream_answer_within_physical_bounds(row):
    outcome = evaluate(row)
    OUTCOMES.append(outcome)
    print(outcome.explain())
    assert outcome.ok, "\n" + outcome.explain()


def test_rows_are_distinct_and_bounds_ordered():
    assert len({r.id for r in ROWS}) == len(ROWS)
    for r in ROWS:
        assert 0 < r.lower < r.upper, r.id


def test_architecture_arithmetic_matches_published_counts():
    """The bounds' inputs reproduce the published parameter and MAC counts: Llama's config
    arithmetic exactly (the model cards' 6,738,415,616 and 8,030,261,248), ResNet-50 (25.6 M,
    4.1 GMACs), ViT-B/16 (86.6 M, 17.6 GMACs) and BERT-base (110 M) within 1 %."""
    for m in (LLAMA2_7B, LLAMA3_8B):
        assert m.params == PUBLISHED_PARAMS[m.name]
    for net in (resnet50(), vit_b16(), bert_base()):
        assert net.params == pytest.approx(PUBLISHED_PARAMS[net.name], rel=0.01), net.name
        if net.name in PUBLISHED_GMACS:
            assert net.macs_low / 1e9 == pytest.approx(PUBLISHED_GMACS[net.name], rel=0.01)
    # ResNet-50 v1.5: 53 convolutions (stem, 16 blocks of 3, 4 projections), 7×7 at the end
    convs = resnet50_convs()
    assert len(convs) == 53 and convs[-1][1:] == (2048, 1, 7)
