"""Reading untrusted YAML and JSON documents: bounded, strict, and clear about where."""

from __future__ import annotations

import pytest

from backend.documents import (
    MAX_DEPTH,
    MAX_NODES,
    ConfigError,
    decode_document,
    load_document,
    load_json,
)


def _refused(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load_document(text)
    return info.value


def test_an_alias_bomb_is_refused_by_what_it_expands_to():
    levels = ['a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(8):
        name, prev = chr(98 + i), chr(97 + i)
        levels.append(f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]")
    error = _refused("\n".join(levels))
    assert error.kind == "too_large" and error.loc == ("(document)",)
    assert f"more than {MAX_NODES} values" in error.message and "alias" in error.message


def test_aliases_and_merge_keys_within_bounds_still_work():
    text = "base: &base {x: 1, y: [1, 2]}\nother: {<<: *base, y: [3]}\ncopy: *base\n"
    assert load_document(text) == {
        "base": {"x": 1, "y": [1, 2]},
        "other": {"x": 1, "y": [3]},
        "copy": {"x": 1, "y": [1, 2]},
    }


def test_a_recursive_alias_is_refused():
    assert "contains it" in _refused("a: &a [1, *a]\n").message


@pytest.mark.parametrize("depth", [MAX_DEPTH, MAX_DEPTH + 1])
def test_nesting_is_bounded_the_same_in_yaml_and_json(depth):
    for text in (
        "a: " + "[" * (depth - 1) + "]" * (depth - 1),
        '{"a": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}",
    ):
        if depth <= MAX_DEPTH:
            assert load_document(text)
        else:
            assert "nested more than 64 levels" in _refused(text).message


def test_deep_documents_are_refused_without_recursion_errors():
    assert _refused("[" * 100_000 + "]" * 100_000).kind == "too_deep"
    assert _refused("a:\n" + "- " * 10_000 + "x\n").kind == "too_deep"
    # Aliases cannot stack nesting past the bound either.
    half = "[" * 40 + "1" + "]" * 40
    assert (
        _refused(
            f"a: &a {half}\nb: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[*a]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n"
        ).kind
        == "too_deep"
    )


def test_values_are_refused_at_their_field():
    nan = _refused('{"rule": {"max": NaN}}')
    assert (nan.loc, nan.kind) == (("rule", "max"), "finite_number") and "NaN" in nan.message
    assert _refused("w: [1, .inf]").loc == ("w", 1)
    nul = _refused('{"name": "a\\u0000b"}')
    assert (nul.loc, nul.kind) == (("name",), "nul_character")
    assert _refused('{"k\\u0000": 1}').loc == ("k\x00",)
    assert _refused('{"s": "\\ud800"}').kind == "string_unicode"
    assert _refused("a: 2020-02-30").loc == ("(document)",)  # not a date
    assert "4300 digits" in _refused("a: " + "9" * 5000).message


def test_bytes_must_be_utf8():
    with pytest.raises(ConfigError) as info:
        decode_document(b"name: caf\xe9")
    assert "not UTF-8" in info.value.message and "offset 9" in info.value.message
    with pytest.raises(ConfigError):
        load_json(b'{"a": "\xff"}')
    assert load_json(b"[1, 2]") == [1, 2]  # a typed body need not be a mapping
