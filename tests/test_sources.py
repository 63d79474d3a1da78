"""The wrong sentences an expert's reading of Units 4 to 7 found (issue 59) do not come
back: each phrasing below was in the course, was corrected against its primary source
(docs/sources.md says which), and must appear nowhere in what a student reads or runs:
the solution notebooks, the student edition, normlib/ and normkit/."""

from pathlib import Path

import pytest

from tests.conftest import REPO

FOLDERS = ("solutions", "notebooks", "normlib", "normkit")
CORRECTED = {  # the old phrasing (an exact piece of it): what was wrong
    # Units 6 and 7
    "between $2^{23}$ and $2^{24}$": "a float32 sum stalls at 2^24 to 2^25 times its term",
    "one thread block per row": "llm.c's LayerNorm kernels give each row one warp",
    "the whole cost of synchronizing": "SyncBatchNorm's cost is two blocking collectives",
    "paper and torch do": "eps under the root is a convention (BatchNorm's, torch's)",
    "eps belongs inside the square root": "a convention, not a law",
    "it belongs under the square root": "a convention, not a law",
    "Megatron-LM has a flag": "Megatron's fp32 residual stream is opt-in",
    "rule of every mixed-precision recipe": "not every recipe",
    "The structure is that of llm.c": "the tutorial's backward locks group rows",
    # Unit 8
    "facebookresearch/DynamicTanh": "DyT's official code is jiachenzhu/DyT",
    "ViT-22B, Gemma 3, Qwen 3": "ViT-22B's QK-norm is a LayerNorm",
    "for the same reason: a zero output": "DiT trains without weight decay",
    "many recipes exclude the norms' gains": "OLMo 2 decays them",
    "at high learning rates cannot happen": "the bound moves with the gains",
    "LayerNorm gives way to RMSNorm": "T5 used RMSNorm in 2019",
    "Pre-LN gives way to norms": "LLaMA 3, Mistral, Qwen3 are plain Pre-LN",
    "OLMo et al. 2025": "OLMo 2 is of 2024",
    "enters **only** through the norms.": "adaLN-Zero also gates the residual",
    "through nothing but those norms,": "adaLN-Zero also gates the residual",
    "passes back less than 7% of the gradient": "tanh's slope at 2 is 0.0707",
    # Units 4 and 5
    "The edge of stability": "Cohen et al.'s term means sharpness at 2/lr",
    "Near the edge of stability": "Cohen et al.'s term means sharpness at 2/lr",
    "well established": "the smoother loss is Santurkar et al.'s proposal",
    "about ten times larger": "the run measures 41 times",
    "common training recipes exclude": "OLMo 2 decays them",
    "stuck at zero": "a dead unit is zero for every example",
    "Behind a norm, a weight's gradient is orthogonal": "only for scale-invariant weights",
    "as in the paper's Figure 3": "unverified",
    "Most models since GPT-2 normalize": "Pre-LN is older than GPT-2",
}


def texts():
    """{path: text} of every file a student reads or runs."""
    found = {}
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*")):
            if path.suffix in (".py", ".ipynb", ".md") and "checkpoint" not in str(path):
                found[path.relative_to(REPO)] = path.read_text(encoding="utf-8")
    return found


@pytest.mark.parametrize("phrase", CORRECTED, ids=list(CORRECTED))
def test_a_corrected_phrasing_does_not_come_back(phrase):
    where = [str(p) for p, text in texts().items()
             if phrase in text or phrase in text.replace("\\n\",\n    \"", "\n")]
    assert not where, f"{phrase!r} ({CORRECTED[phrase]}) is back in {', '.join(where)}"


def test_the_table_of_sources_lists_the_units_it_checked():
    table = (REPO / "docs" / "sources.md").read_text()
    for unit in ("04_why_normalization_helps", "06_numerics_and_precision", "07_kernels_and_speed",
                 "08_normalization_today", "09_norms_at_scale"):
        assert unit in table
    assert sum(line.startswith("| ") for line in table.splitlines()) >= 60
    assert Path(REPO / "tests" / "test_sources.py").name in table
