"""Unit 4's table of where each norm sits (the markdown cell `placements-text` of
solutions/04_why_normalization_helps.ipynb, issue 44, point 4): every row names its norm,
its place and a source with an arXiv link, no model has two rows, and the families the unit
promises (a vision transformer, ConvNeXt, a diffusion U-Net, a speech model) are there."""

import json
import re

import pytest

from tests.conftest import REPO

NOTEBOOK = REPO / "solutions" / "04_why_normalization_helps.ipynb"
CELL = "placements-text"
COLUMNS = ("model", "norm", "where", "source")
ARXIV = re.compile(r"https://arxiv\.org/abs/\d{4}\.\d{5}(v\d+)?(?!\d)")
FAMILIES = {  # the families the section must cover: a pattern its model column matches
    "ViT": r"\bViT\b",
    "ConvNeXt": r"\bConvNeXt\b",
    "a diffusion U-Net": r"(?i)\bdiffusion\b.*\bU-Net\b",
    "wav2vec 2.0": r"\bwav2vec 2\.0\b",
}


def markdown_of(notebook, cell_id):
    """The source of the notebook's cell with this id, as one string; a clear failure when
    the notebook has none (the section is missing)."""
    found = [c for c in notebook["cells"] if c.get("id") == cell_id]
    if not found:
        pytest.fail(f"{NOTEBOOK.name} has no cell with id {cell_id!r}: the section "
                    "'Where each norm sits' is missing")
    source = found[0]["source"]
    return source if isinstance(source, str) else "".join(source)


def table_rows(markdown):
    """The body of the first markdown table in the text: one dict per row, the cells' text
    stripped, under the names COLUMNS; a failure when the table is missing or a row has
    another number of cells than its header."""
    lines = [line.strip() for line in markdown.splitlines()]
    table = [line for line in lines if line.startswith("|")]
    assert len(table) >= 3, "no markdown table (a header, its |---| line and rows)"
    header, rule, *body = table
    assert set(rule) <= set("|-: "), f"the table's second line is not |---|: {rule!r}"
    rows = []
    for line in [header, *body]:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == len(COLUMNS), f"{len(cells)} cells, not {len(COLUMNS)}: {line!r}"
        rows.append(dict(zip(COLUMNS, cells)))
    return rows[1:]


def notebook_rows():
    """The table's rows in the notebook (read here, in each test, so that a missing section
    fails the test rather than erroring in a fixture)."""
    return table_rows(markdown_of(json.loads(NOTEBOOK.read_text()), CELL))


def check_sources(rows):
    """Every row has a model, a norm and a place, and an arXiv link in its source."""
    for row in rows:
        assert row["model"] and row["norm"] and row["where"], row
        assert ARXIV.search(row["source"]), f"{row['model']}: no arXiv link in {row['source']!r}"


def test_every_row_names_its_norm_its_place_and_an_arxiv_source():
    check_sources(notebook_rows())


def test_no_model_has_two_rows():
    """Compared by name, without the description in parentheses: "ViT (vision transformer)"
    and "ViT (ImageNet)" are one model."""
    names = [re.sub(r"\s+", " ", row["model"].split("(")[0]).strip().lower()
             for row in notebook_rows()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


def test_the_promised_families_are_there():
    rows = notebook_rows()
    missing = [family for family, pattern in FAMILIES.items()
               if not any(re.search(pattern, row["model"]) for row in rows)]
    assert not missing, f"no row for {missing}"


def test_a_row_without_a_source_fails():
    table = ("| model | norm | where | source |\n|---|---|---|---|\n"
             "| ViT | LayerNorm | Pre-LN | [arXiv](https://arxiv.org/abs/2010.11929) |\n"
             "| ResNet | BatchNorm | after each convolution | He et al. 2016 |\n")
    with pytest.raises(AssertionError, match="ResNet: no arXiv link"):
        check_sources(table_rows(table))
    for link in ("arxiv.org/abs/1512.03385", "https://arxiv.org/abs/1512.0338",
                 "https://arxiv.org/pdf/1512.03385"):  # links of other forms
        with pytest.raises(AssertionError, match="no arXiv link"):
            check_sources(table_rows(table.replace("He et al. 2016", link)))
    check_sources(table_rows(table.replace("He et al. 2016", "https://arxiv.org/abs/1512.03385v1")))


def test_a_missing_section_fails_clearly():
    with pytest.raises(pytest.fail.Exception, match="no cell with id 'placements-text'"):
        markdown_of({"cells": [{"id": "summary", "source": "## Summary"}]}, CELL)
