"""Per-sample text features (stabdiag.advise.samples.features, ngrams, textscan): the batched, hashed
computations give what the plain definitions give, answer by answer."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from stabdiag.advise.samples import features as features_module
from stabdiag.advise.samples.features import features
from stabdiag.advise.samples.textscan import ODD, marker_hits, text_shape
from stabdiag.read.samples import Sample


def _longest_repeat(words: list) -> int:
    """The plain definition: the most consecutive words found at two different places."""
    best = 0
    for n in range(1, len(words)):
        spans = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
        if len(set(spans)) == len(spans):
            break
        best = n
    return best


def _repeated_share(words: list, n: int = 3) -> float:
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    return sum(grams.count(g) > 1 for g in grams) / len(grams) if grams else 0.0


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    vocab = ["a", "b", "c", "The", "the", "x", "<answer>", "日本", "語"]
    out = []
    for _ in range(count):
        size = rng.choice([0, 1, 2, 3, 5, 9, 30, 120])
        pool = vocab[:rng.randint(1, len(vocab))]
        if rng.random() < 0.2:                       # a loop, as a degenerate policy writes
            unit = [rng.choice(pool) for _ in range(rng.randint(1, 6))]
            words = (unit * size)[:size]
        else:
            words = [rng.choice(pool) for _ in range(size)]
        out.append(rng.choice([" ", "\n", "  "]).join(words))
    return out


def _samples(texts: list[str]) -> list[Sample]:
    return [Sample(step=i // 8, completion=t, chars=len(t), group=str(i // 4)) for i, t in enumerate(texts)]


@pytest.mark.parametrize("seed", [0, 1])
def test_repetition_is_the_plain_definition(seed):
    texts = _texts(seed, 400)
    table = features(_samples(texts))
    for i, text in enumerate(texts):
        words = text.lower().split()
        if not words:
            assert np.isnan(table.columns["longest_repeat"][i]) and np.isnan(table.columns["repeated_ngrams"][i])
            continue
        assert table.columns["longest_repeat"][i] == _longest_repeat(words), text
        assert table.columns["repeated_ngrams"][i] == pytest.approx(_repeated_share(words)), text
        assert table.columns["words"][i] == len(words)


def test_token_ids_that_differ_in_low_bits_are_different_words():
    # Python hashes small ints to themselves: ids 4096 apart must not become one n-gram
    ids = [(0, 1, 2, 3, 4, 5), (7, 4103, 9, 7, 4103, 9), (1, 4097, 1, 8193)]
    table = features([Sample(step=1, completion=None, response_ids=r, tokens=len(r)) for r in ids])
    assert list(table.columns["longest_repeat"]) == [0, 3, 1]
    assert list(table.columns["repeated_ngrams"]) == [0.0, pytest.approx(2 / 4), 0.0]


def test_phrases_are_found_as_whole_words_anywhere_and_at_the_start():
    texts = _texts(3, 300) + [f"x the answer is {i % 10}" for i in range(90)] + [f"the answer is {i % 10}"
                                                                                   for i in range(90)]
    table = features(_samples(texts))
    phrases = [n for n in table.columns if n.startswith(("has:", "opens:"))]
    assert "opens:the answer is" in phrases
    for name in phrases:
        gram = name.split(":", 1)[1].split()
        for i, text in enumerate(texts):
            words = text.lower().split()
            spans = [words[j:j + len(gram)] for j in range(len(words) - len(gram) + 1)]
            expected = words[:len(gram)] == gram if name.startswith("opens:") else gram in spans
            assert table.columns[name][i] == float(expected), (name, text)


def test_a_phrase_that_is_a_marker_is_one_feature():
    texts = ["foo <answer> 1"] * 30 + ["foo bar"] * 30
    table = features(_samples(texts))
    assert "answer_tag" in table.columns and "has:<answer>" not in table.columns


def test_batches_do_not_change_the_features(monkeypatch):
    texts = _texts(4, 300)
    whole = features(_samples(texts))
    monkeypatch.setattr(features_module, "_BATCH_WORDS", 50)          # a batch every few answers
    cut = features(_samples(texts))
    assert whole.columns.keys() == cut.columns.keys()
    for name in whole.columns:
        np.testing.assert_array_equal(whole.columns[name], cut.columns[name], err_msg=name)


@pytest.mark.parametrize("text", ["plain words, and punctuation!", "tab\tand \x07bell ☃ snow", "日本語のテキスト",
                                  "mixed Latin 中文 and русский текст", "", "→→→ arrows"])
def test_text_shape_counts_what_the_regex_counts(text):
    share, switches = text_shape(text)
    assert share == (len(ODD.findall(text)) / len(text) if text else 0.0)
    expected = {"mixed Latin 中文 and русский текст": 3, "日本語のテキスト": 2}.get(text, 0)
    assert switches == expected


@pytest.mark.parametrize("pattern", [r"<answer>", r"\\boxed\{", r"^the", r"x$", r"a*", r"(?<=a)b", r"```"])
def test_markers_in_one_pass_match_a_search_per_text(pattern):
    texts = _texts(5, 200) + ["the end", "a\\boxed{1}", "```code```", None, "ab", ""]
    expected = [np.nan if t is None else float(re.search(pattern, t) is not None) for t in texts]
    np.testing.assert_array_equal(marker_hits(texts, pattern), expected)
